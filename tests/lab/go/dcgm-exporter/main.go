// Command dcgm-exporter is the lab's STAND-IN for NVIDIA's DCGM exporter. It is not NVIDIA's
// program and does not use DCGM: DCGM (nv-hostengine, libdcgm) is not obtainable here, so this is
// the one operand of the lab that is modelled rather than real. It follows the exporter's
// documented interface (NVIDIA/dcgm-exporter README and its default-counters.csv; REFERENCE.md
// section 4) closely enough that manifests, Services and Prometheus configuration written for the
// real image work unchanged:
//
//   - listens on DCGM_EXPORTER_LISTEN / -a (default ":9400"), serves /metrics and /health;
//   - reads the counters to export from DCGM_EXPORTER_COLLECTORS / -f, CSV rows
//     "FIELD, gauge|counter|label, help" ('#' comments), default
//     /etc/dcgm-exporter/default-counters.csv;
//   - collects every DCGM_EXPORTER_INTERVAL / -c milliseconds (default 30000);
//   - labels every series gpu, UUID, pci_bus_id, device, modelName, Hostname (the node's name from
//     NODE_NAME, else the host name) and the fields listed as "label" (DCGM_FI_DRIVER_VERSION);
//     DCGM_FI_DEV_XID_ERRORS (the last XID, a gauge) adds err_code and err_msg once there is one;
//     MIG devices add GPU_I_PROFILE and GPU_I_ID;
//   - with DCGM_EXPORTER_KUBERNETES=true / -k, attributes devices to pods through the kubelet's
//     pod-resources API (/var/lib/kubelet/pod-resources/kubelet.sock) and adds pod, namespace and
//     container labels.
//
// Values come from NVML (the node's fake NVML in the lab), so they are the GPU's own figures. A
// field this stand-in has no NVML source for (the DCGM_FI_PROF_* profiling fields, which DCGM
// measures itself; memory temperature, NVLink bandwidth, vGPU licence) is logged at start and not
// exported, as the real exporter leaves out fields a GPU does not support.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

const podResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// field is one CSV row.
type field struct {
	name, kind, help string
}

// source reads a field's value for a physical GPU (mig == nil) or a MIG device.
type source func(d nvml.Device, st *gpuStatus) (float64, bool)

// gpuStatus is what the event loop knows about one GPU.
type gpuStatus struct {
	lastXid atomic.Uint64 // written by the event loop, read by collections
}

func ok(r nvml.Return) bool { return r == nvml.SUCCESS }

var sources = map[string]source{
	"DCGM_FI_DEV_SM_CLOCK": func(d nvml.Device, _ *gpuStatus) (float64, bool) {
		v, r := d.GetClockInfo(nvml.CLOCK_SM)
		return float64(v), ok(r)
	},
	"DCGM_FI_DEV_MEM_CLOCK": func(d nvml.Device, _ *gpuStatus) (float64, bool) {
		v, r := d.GetClockInfo(nvml.CLOCK_MEM)
		return float64(v), ok(r)
	},
	"DCGM_FI_DEV_GPU_TEMP": func(d nvml.Device, _ *gpuStatus) (float64, bool) {
		v, r := d.GetTemperature(nvml.TEMPERATURE_GPU)
		return float64(v), ok(r)
	},
	"DCGM_FI_DEV_POWER_USAGE": func(d nvml.Device, _ *gpuStatus) (float64, bool) {
		v, r := d.GetPowerUsage() // mW; DCGM reports W
		return float64(v) / 1000, ok(r)
	},
	"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": func(d nvml.Device, _ *gpuStatus) (float64, bool) {
		v, r := d.GetTotalEnergyConsumption() // mJ, as DCGM reports it
		return float64(v), ok(r)
	},
	"DCGM_FI_DEV_PCIE_REPLAY_COUNTER": func(d nvml.Device, _ *gpuStatus) (float64, bool) {
		v, r := d.GetPcieReplayCounter()
		return float64(v), ok(r)
	},
	"DCGM_FI_DEV_GPU_UTIL": func(d nvml.Device, _ *gpuStatus) (float64, bool) {
		u, r := d.GetUtilizationRates()
		return float64(u.Gpu), ok(r)
	},
	"DCGM_FI_DEV_MEM_COPY_UTIL": func(d nvml.Device, _ *gpuStatus) (float64, bool) {
		u, r := d.GetUtilizationRates()
		return float64(u.Memory), ok(r)
	},
	"DCGM_FI_DEV_ENC_UTIL": func(d nvml.Device, _ *gpuStatus) (float64, bool) {
		v, _, r := d.GetEncoderUtilization()
		return float64(v), ok(r)
	},
	"DCGM_FI_DEV_DEC_UTIL": func(d nvml.Device, _ *gpuStatus) (float64, bool) {
		v, _, r := d.GetDecoderUtilization()
		return float64(v), ok(r)
	},
	"DCGM_FI_DEV_XID_ERRORS": func(_ nvml.Device, st *gpuStatus) (float64, bool) {
		if st == nil {
			return 0, false
		}
		return float64(st.lastXid.Load()), true // the last XID seen, 0 before any
	},
	// frame buffer figures in MiB, as DCGM reports them
	"DCGM_FI_DEV_FB_FREE":                     memory(func(m nvml.Memory_v2) uint64 { return m.Free }),
	"DCGM_FI_DEV_FB_USED":                     memory(func(m nvml.Memory_v2) uint64 { return m.Used }),
	"DCGM_FI_DEV_FB_RESERVED":                 memory(func(m nvml.Memory_v2) uint64 { return m.Reserved }),
	"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS":   remap(func(c, _ int, _, _ bool) float64 { return float64(c) }),
	"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": remap(func(_, u int, _, _ bool) float64 { return float64(u) }),
	"DCGM_FI_DEV_ROW_REMAP_FAILURE":           remap(func(_, _ int, _, f bool) float64 { return b2f(f) }),
}

// the fields a MIG device has values of its own for (the rest are the parent GPU's)
var migSources = map[string]bool{"DCGM_FI_DEV_FB_FREE": true, "DCGM_FI_DEV_FB_USED": true,
	"DCGM_FI_DEV_FB_RESERVED": true}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func memory(pick func(nvml.Memory_v2) uint64) source {
	return func(d nvml.Device, _ *gpuStatus) (float64, bool) {
		m, r := d.GetMemoryInfo_v2()
		return float64(pick(m)) / (1 << 20), ok(r)
	}
}

func remap(pick func(int, int, bool, bool) float64) source {
	return func(d nvml.Device, _ *gpuStatus) (float64, bool) {
		c, u, p, f, r := d.GetRemappedRows()
		return pick(c, u, p, f), ok(r)
	}
}

func readFields(path string) ([]field, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []field
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.SplitN(line, ",", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("%s:%d: want FIELD, TYPE, HELP, got %q", path, n, line)
		}
		fl := field{strings.TrimSpace(parts[0]), strings.TrimSpace(parts[1]), strings.TrimSpace(parts[2])}
		switch fl.kind {
		case "gauge", "counter", "label":
		default:
			return nil, fmt.Errorf("%s:%d: type %q is not gauge, counter or label", path, n, fl.kind)
		}
		out = append(out, fl)
	}
	return out, sc.Err()
}

// exporter holds the configuration and the last collection.
type exporter struct {
	fields     []field
	hostname   string
	kubernetes bool
	driver     string
	status     map[string]*gpuStatus // by GPU UUID
	mu         sync.Mutex
	body       string
	lastErr    error
	collected  time.Time
	reported   map[string]bool // problems already logged, so each is logged once while it lasts
}

type device struct {
	labels []string // key="value" pairs, in exposition order
	dev    nvml.Device
	status *gpuStatus
	mig    bool
	ids    []string // the UUIDs the kubelet may know it by
}

func esc(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// note logs a problem the first time a collection meets it.
func (e *exporter) note(seen map[string]bool, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	seen[msg] = true
	if !e.reported[msg] {
		log.Print(msg)
	}
}

func (e *exporter) devices() ([]device, error) {
	seen := map[string]bool{}
	defer func() { e.reported = seen }()
	n, r := nvml.DeviceGetCount()
	if !ok(r) {
		return nil, fmt.Errorf("nvmlDeviceGetCount: %v", nvml.ErrorString(r))
	}
	var out []device
	for i := 0; i < n; i++ {
		d, r := nvml.DeviceGetHandleByIndex(i)
		if !ok(r) {
			e.note(seen, "GPU %d: %v (left out)", i, nvml.ErrorString(r))
			continue
		}
		uuid, r := d.GetUUID()
		if !ok(r) {
			e.note(seen, "GPU %d: UUID: %v (left out)", i, nvml.ErrorString(r))
			continue
		}
		name, _ := d.GetName()
		minor, _ := d.GetMinorNumber()
		pci, _ := d.GetPciInfo()
		bus := strings.TrimRight(string(pci.BusId[:]), "\x00")
		base := []string{
			fmt.Sprintf(`gpu="%d"`, i), fmt.Sprintf(`UUID="%s"`, esc(uuid)), fmt.Sprintf(`pci_bus_id="%s"`, esc(bus)),
			fmt.Sprintf(`device="nvidia%d"`, minor), fmt.Sprintf(`modelName="%s"`, esc(name)),
			fmt.Sprintf(`Hostname="%s"`, esc(e.hostname)),
		}
		st := e.status[uuid]
		out = append(out, device{labels: base, dev: d, status: st, ids: []string{uuid}})
		if cur, _, r := d.GetMigMode(); ok(r) && cur == nvml.DEVICE_MIG_ENABLE {
			max, _ := d.GetMaxMigDeviceCount()
			for k := 0; k < max; k++ {
				m, r := d.GetMigDeviceHandleByIndex(k)
				if !ok(r) {
					continue
				}
				mu, _ := m.GetUUID()
				gi, _ := m.GetGpuInstanceId()
				mname, _ := m.GetName()
				prof := mname
				if j := strings.LastIndex(mname, "MIG "); j >= 0 {
					prof = mname[j+4:]
				}
				if j := strings.Index(prof, "c."); j > 0 { // "1c.2g.20gb": a compute instance of 2g.20gb
					prof = prof[j+2:]
				}
				labels := append(append([]string{}, base...), fmt.Sprintf(`GPU_I_PROFILE="%s"`, esc(prof)),
					fmt.Sprintf(`GPU_I_ID="%d"`, gi))
				out = append(out, device{labels: labels, dev: m, status: st, mig: true, ids: []string{mu}})
			}
		}
	}
	return out, nil
}

// podOwners maps a device ID the kubelet handed out (a GPU or MIG UUID; time-sliced replicas
// as UUID::N) to the pod labels of the container holding it.
func podOwners() (map[string]string, error) {
	conn, err := grpc.NewClient("unix://"+podResourcesSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := podresourcesv1.NewPodResourcesListerClient(conn).List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range resp.GetPodResources() {
		for _, c := range p.GetContainers() {
			for _, d := range c.GetDevices() {
				if !strings.HasPrefix(d.GetResourceName(), "nvidia.com/") {
					continue
				}
				for _, id := range d.GetDeviceIds() {
					if k := strings.Index(id, "::"); k >= 0 {
						id = id[:k]
					}
					out[id] = fmt.Sprintf(`container="%s",namespace="%s",pod="%s"`, esc(c.GetName()),
						esc(p.GetNamespace()), esc(p.GetName()))
				}
			}
		}
	}
	return out, nil
}

func (e *exporter) collect() error {
	devs, err := e.devices()
	if err != nil {
		return err
	}
	var owners map[string]string
	if e.kubernetes {
		if owners, err = podOwners(); err != nil {
			log.Printf("pod attribution: %v (series without pod labels)", err)
		}
	}
	var extra []string
	for _, f := range e.fields {
		if f.kind == "label" && f.name == "DCGM_FI_DRIVER_VERSION" {
			extra = append(extra, fmt.Sprintf(`DCGM_FI_DRIVER_VERSION="%s"`, esc(e.driver)))
		}
	}
	var b strings.Builder
	for _, f := range e.fields {
		src := sources[f.name]
		if f.kind == "label" || src == nil {
			continue
		}
		var lines []string
		for _, d := range devs {
			if d.mig && !migSources[f.name] {
				continue
			}
			v, good := src(d.dev, d.status)
			if !good {
				continue
			}
			labels := append(append([]string{}, d.labels...), extra...)
			if f.name == "DCGM_FI_DEV_XID_ERRORS" && v != 0 {
				// as the real exporter's GPU collector does: the XID as err_code, its text as err_msg
				labels = append(labels, fmt.Sprintf(`err_code="%d"`, int(v)), fmt.Sprintf(`err_msg="%s"`, esc(xidText(int(v)))))
			}
			for _, id := range d.ids {
				if o, found := owners[id]; found {
					labels = append(labels, o)
				}
			}
			lines = append(lines, fmt.Sprintf("%s{%s} %s\n", f.name, strings.Join(labels, ","),
				strconv.FormatFloat(v, 'f', -1, 64)))
		}
		if len(lines) == 0 {
			continue
		}
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", f.name, f.help, f.name, f.kind)
		for _, l := range lines {
			b.WriteString(l)
		}
	}
	e.mu.Lock()
	e.body, e.collected = b.String(), time.Now()
	e.mu.Unlock()
	return nil
}

// xidText names an XID as NVIDIA's XID catalogue describes it (the err_msg label); others are
// "Unknown Error", as the real exporter says of an XID it has no text for.
func xidText(xid int) string {
	if t, found := map[int]string{
		8: "GPU stopped processing", 13: "Graphics Engine Exception", 31: "GPU memory page fault",
		43: "GPU stopped processing", 45: "Preemptive cleanup, due to previous errors",
		48: "Double Bit ECC Error", 62: "Internal micro-controller halt", 63: "GPU memory remapping event",
		64: "GPU memory remapping failure", 74: "NVLINK Error", 79: "GPU has fallen off the bus",
		92: "High single-bit ECC error rate", 94: "Contained memory error", 95: "Uncontained memory error",
		109: "Context Switch Timeout Error", 119: "GSP RPC Timeout", 120: "GSP Error",
	}[xid]; found {
		return t
	}
	return "Unknown Error"
}

// watchXids keeps the last XID of every GPU (DCGM_FI_DEV_XID_ERRORS).
func (e *exporter) watchXids() {
	set, r := nvml.EventSetCreate()
	if !ok(r) {
		log.Printf("XID events: %v", nvml.ErrorString(r))
		return
	}
	n, _ := nvml.DeviceGetCount()
	for i := 0; i < n; i++ {
		if d, r := nvml.DeviceGetHandleByIndex(i); ok(r) {
			if r := d.RegisterEvents(nvml.EventTypeXidCriticalError, set); !ok(r) && r != nvml.ERROR_NOT_SUPPORTED {
				log.Printf("GPU %d: XID events: %v", i, nvml.ErrorString(r))
			}
		}
	}
	for {
		ev, r := set.Wait(5000)
		if r == nvml.ERROR_TIMEOUT {
			continue
		}
		if !ok(r) {
			log.Printf("XID events: %v", nvml.ErrorString(r))
			time.Sleep(5 * time.Second)
			continue
		}
		if uuid, r := ev.Device.GetUUID(); ok(r) {
			if st := e.status[uuid]; st != nil { // the map is fixed at start
				st.lastXid.Store(ev.EventData)
			}
			log.Printf("XID %d on %s", ev.EventData, uuid)
		}
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func main() {
	log.SetFlags(log.LstdFlags | log.LUTC)
	listen := flag.String("a", envOr("DCGM_EXPORTER_LISTEN", ":9400"), "address to listen on")
	collectors := flag.String("f", envOr("DCGM_EXPORTER_COLLECTORS", "/etc/dcgm-exporter/default-counters.csv"),
		"the counters CSV")
	intervalDef, _ := strconv.Atoi(envOr("DCGM_EXPORTER_INTERVAL", "30000"))
	interval := flag.Int("c", intervalDef, "collection interval in milliseconds")
	k8s := flag.Bool("k", envOr("DCGM_EXPORTER_KUBERNETES", "false") == "true", "attribute GPUs to pods")
	flag.Parse()

	fields, err := readFields(*collectors)
	if err != nil {
		log.Fatalf("counters: %v", err)
	}
	var missing []string
	for _, f := range fields {
		if f.kind != "label" && sources[f.name] == nil {
			missing = append(missing, f.name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		log.Printf("lab stand-in: no NVML source for %s; not exported", strings.Join(missing, ", "))
	}
	if r := nvml.Init(); !ok(r) {
		log.Fatalf("NVML: %v", nvml.ErrorString(r))
	}
	host := os.Getenv("NODE_NAME")
	if host == "" {
		host, _ = os.Hostname()
	}
	driver, _ := nvml.SystemGetDriverVersion()
	e := &exporter{fields: fields, hostname: host, kubernetes: *k8s, driver: driver, status: map[string]*gpuStatus{},
		reported: map[string]bool{}}
	n, _ := nvml.DeviceGetCount()
	for i := 0; i < n; i++ {
		if d, r := nvml.DeviceGetHandleByIndex(i); ok(r) {
			if u, r := d.GetUUID(); ok(r) {
				e.status[u] = &gpuStatus{}
			}
		}
	}
	go e.watchXids()
	if err := e.collect(); err != nil {
		log.Printf("collect: %v", err)
		e.lastErr = err
	}
	go func() {
		for range time.Tick(time.Duration(*interval) * time.Millisecond) {
			err := e.collect()
			e.mu.Lock()
			e.lastErr = err
			e.mu.Unlock()
			if err != nil {
				log.Printf("collect: %v", err)
			}
		}
	}()

	http.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		e.mu.Lock()
		body := e.body
		e.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte(body))
	})
	http.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) {
		e.mu.Lock()
		err := e.lastErr
		e.mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("OK"))
	})
	log.Printf("lab stand-in for the DCGM exporter: %d GPU(s), driver %s, listening on %s", n, driver, *listen)
	log.Fatal(http.ListenAndServe(*listen, nil))
}
