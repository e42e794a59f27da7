# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import os
import re

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import dcgm_fields

LAB_CSV = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "lab", "kubelab",
                       "dcgm-default-counters.csv")


def read_lab_csv():
    with open(LAB_CSV, encoding="utf-8") as handle:
        return handle.read()


def as_dicts(triples):
    return [{"field": field, "type": kind, "help": text} for field, kind, text in triples]


# ---- the field list ----

def test_known_fields_count_and_shape():
    assert len(dcgm_fields.KNOWN_FIELDS) == 966
    assert all(re.match(r"^DCGM_FI_[A-Z0-9_]+$", name) for name in dcgm_fields.KNOWN_FIELDS)


@pytest.mark.parametrize("name", [
    "DCGM_FI_DRIVER_VERSION", "DCGM_FI_NVML_VERSION", "DCGM_FI_PROCESS_NAME", "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_TEMP_CELSIUS", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_L0", "DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL", "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_POWER_VIOLATION",
    "DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT", "DCGM_FI_DEV_CPU_TEMP_CURRENT", "DCGM_FI_DEV_SERIAL",
    "DCGM_FI_DEV_BRAND", "DCGM_FI_DEV_VBIOS_VERSION", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
])
def test_known_fields_has(name):
    assert name in dcgm_fields.KNOWN_FIELDS


@pytest.mark.parametrize("marker", [
    "DCGM_FI_UNKNOWN", "DCGM_FI_SYSTEM_FIELD_UNKNOWN", "DCGM_FI_MAX_FIELDS", "DCGM_FI_MAX_VGPU_FIELDS",
    "DCGM_FI_MAX_NVSWITCH_FIELDS", "DCGM_FI_FIRST_VGPU_FIELD_ID", "DCGM_FI_LAST_VGPU_FIELD_ID",
    "DCGM_FI_FIRST_NVSWITCH_FIELD_ID", "DCGM_FI_LAST_NVSWITCH_FIELD_ID", "DCGM_FI_DEV_FIRST_CONNECTX_FIELD_ID",
    "DCGM_FI_DEV_LAST_CONNECTX_FIELD_ID",
])
def test_known_fields_lack_markers(marker):
    assert marker not in dcgm_fields.KNOWN_FIELDS
    assert marker not in dcgm_fields.ACCEPTED_FIELDS


def test_exporter_and_legacy_fields_are_accepted():
    rows = [(name, "gauge", "help") for name in sorted(dcgm_fields.EXPORTER_FIELDS | dcgm_fields.LEGACY_FIELDS)]
    assert len(rows) == 45
    assert dcgm_fields.errors(rows) == []


# ---- the defaults ----

def test_defaults_are_known_and_valid():
    assert len(dcgm_fields.DEFAULT_COUNTERS) == 26
    for field, kind, text in dcgm_fields.DEFAULT_COUNTERS:
        assert field in dcgm_fields.KNOWN_FIELDS
        assert kind in dcgm_fields.TYPES
        assert text and text == text.strip()
    assert dcgm_fields.errors(dcgm_fields.DEFAULT_COUNTERS) == []


def test_lab_csv_rows_equal_defaults():
    text = read_lab_csv()
    assert dcgm_fields.errors(text) == []
    assert dcgm_fields.parse_rows(text) == as_dicts(dcgm_fields.DEFAULT_COUNTERS)
    assert dcgm_fields.parse_rows(text.splitlines(True)) == as_dicts(dcgm_fields.DEFAULT_COUNTERS)


# ---- parse_rows ----

@pytest.mark.parametrize("rows, expected", [
    (["DCGM_FI_DEV_SM_CLOCK, gauge, SM clock (in MHz)."],
     [("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock (in MHz).")]),
    (["DCGM_FI_DEV_SM_CLOCK,gauge,SM clock"], [("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock")]),
    (["DCGM_FI_DEV_DEC_UTIL ,     gauge,   Decoder utilization (in %).  \n"],
     [("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).")]),
    (["# Format", "", "DCGM_FI_DEV_SM_CLOCK, gauge, a", "\n", "#DCGM_FI_DEV_GPU_TEMP, gauge, b"],
     [("DCGM_FI_DEV_SM_CLOCK", "gauge", "a")]),
    (['DCGM_FI_DEV_SM_CLOCK, gauge,"SM clock, in MHz"'], [("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock, in MHz")]),
    (['DCGM_FI_DEV_SM_CLOCK, gauge,"the ""SM"" clock, MHz"'],
     [("DCGM_FI_DEV_SM_CLOCK", "gauge", 'the "SM" clock, MHz')]),
    (['DCGM_FI_DEV_SM_CLOCK, gauge,"  padded  "'], [("DCGM_FI_DEV_SM_CLOCK", "gauge", "padded")]),
    (["DCGM_FI_DEV_SM_CLOCK, gauge, a # not a comment"],
     [("DCGM_FI_DEV_SM_CLOCK", "gauge", "a # not a comment")]),
    (["DCGM_FI_DEV_SM_CLOCK,\tgauge, a"], [("DCGM_FI_DEV_SM_CLOCK", "\tgauge", "a")]),
    (["DCGM_FI_DEV_SM_CLOCK, gauge, a\r\n"], [("DCGM_FI_DEV_SM_CLOCK", "gauge", "a")]),
    ([{"field": " DCGM_FI_DEV_SM_CLOCK ", "type": "gauge", "help": "a, b"}],
     [("DCGM_FI_DEV_SM_CLOCK", "gauge", "a, b")]),
    ([("DCGM_FI_DEV_SM_CLOCK", "gauge", "a"), ["DCGM_FI_DEV_GPU_TEMP", "gauge", "b"]],
     [("DCGM_FI_DEV_SM_CLOCK", "gauge", "a"), ("DCGM_FI_DEV_GPU_TEMP", "gauge", "b")]),
    ("# Format\nDCGM_FI_DEV_SM_CLOCK, gauge, a\n\nDCGM_FI_DEV_GPU_TEMP, gauge, b\n",
     [("DCGM_FI_DEV_SM_CLOCK", "gauge", "a"), ("DCGM_FI_DEV_GPU_TEMP", "gauge", "b")]),
    ([], []),
])
def test_parse_rows(rows, expected):
    assert dcgm_fields.parse_rows(rows) == as_dicts(expected)


@pytest.mark.parametrize("rows, words", [
    (["DCGM_FI_DEV_SM_CLOCK, gauge, a, b"], ["row 1 (DCGM_FI_DEV_SM_CLOCK)", "4 comma-separated parts"]),
    (["# c", "DCGM_FI_DEV_SM_CLOCK, gauge"], ["row 2 (DCGM_FI_DEV_SM_CLOCK)", "2 comma-separated parts"]),
    ([{"field": "DCGM_FI_DEV_SM_CLOCK"}], ["row 1 (DCGM_FI_DEV_SM_CLOCK)", "lacks type, help"]),
    ([42], ["row 1 (?)", "not int"]),
])
def test_parse_rows_refuses_malformed(rows, words):
    with pytest.raises(ValueError) as caught:
        dcgm_fields.parse_rows(rows)
    for word in words:
        assert word in str(caught.value)


# ---- errors ----

@pytest.mark.parametrize("rows, expected", [
    # unknown field names
    (["DCGM_FI_DEV_GPU_TEMPERATURE, gauge, t"],
     [["row 1 (DCGM_FI_DEV_GPU_TEMPERATURE)", "unknown field", "could not find DCGM field",
       "closest known names: DCGM_FI_DEV_GPU_TEMP"]]),
    (["DCGM_FI_DEV_SM_CLOCK, gauge, a", "DCGM_FI_DEV_MEM_CLOK, gauge, m"],
     [["row 2 (DCGM_FI_DEV_MEM_CLOK)", "unknown field", "DCGM_FI_DEV_MEM_CLOCK"]]),
    (["DCGM_FI_PROF_SM_ACTIV, gauge, s"], [["row 1 (DCGM_FI_PROF_SM_ACTIV)", "DCGM_FI_PROF_SM_ACTIVE"]]),
    (["DCGM_EXP_XID_ERROR_COUNT, counter, x"], [["row 1", "DCGM_EXP_XID_ERRORS_COUNT"]]),
    (["dcgm_fi_dev_gpu_temp, gauge, t"], [["row 1 (dcgm_fi_dev_gpu_temp)", "upper case", "DCGM_FI_DEV_GPU_TEMP"]]),
    (["NOT_A_FIELD_AT_ALL_ZZZ, gauge, t"], [["row 1 (NOT_A_FIELD_AT_ALL_ZZZ)", "unknown field", "dcgm_fields.h"]]),
    ([", gauge, t"], [["row 1 (?)", "field name is empty"]]),
    # types
    (["DCGM_FI_DEV_SM_CLOCK, gaugee, a"],
     [["row 1 (DCGM_FI_DEV_SM_CLOCK)", "'gaugee'", "not one of gauge, counter, label",
       "could not find Prometheus metric type"]]),
    (["DCGM_FI_DEV_SM_CLOCK, Gauge, a"], [["row 1 (DCGM_FI_DEV_SM_CLOCK)", "lower case", "use gauge"]]),
    (["DCGM_FI_DEV_SM_CLOCK, histogram, a"], [["row 1 (DCGM_FI_DEV_SM_CLOCK)", "'histogram'", "_bucket"]]),
    (["DCGM_FI_DEV_SM_CLOCK, summary, a"], [["row 1 (DCGM_FI_DEV_SM_CLOCK)", "'summary'", "no valid summary"]]),
    (["DCGM_FI_DEV_SM_CLOCK,\tgauge, a"], [["row 1 (DCGM_FI_DEV_SM_CLOCK)", "'\\tgauge'"]]),
    # help
    (["DCGM_FI_DEV_SM_CLOCK, gauge,"], [["row 1 (DCGM_FI_DEV_SM_CLOCK)", "help text is empty", "# HELP"]]),
    (["DCGM_FI_DEV_SM_CLOCK, gauge, \t"], [["row 1 (DCGM_FI_DEV_SM_CLOCK)", "help text is empty"]]),
    ([("DCGM_FI_DEV_SM_CLOCK", "gauge", "two\nlines")], [["row 1 (DCGM_FI_DEV_SM_CLOCK)", "line break"]]),
    # duplicates
    (["DCGM_FI_DEV_SM_CLOCK, gauge, a", "# c", "DCGM_FI_DEV_SM_CLOCK, counter, b"],
     [["row 3 (DCGM_FI_DEV_SM_CLOCK)", "duplicate field", "row 1 has it already", "replaces the default"]]),
    # malformed rows
    (["DCGM_FI_DEV_SM_CLOCK, gauge, SM clock, in MHz"],
     [["row 1 (DCGM_FI_DEV_SM_CLOCK)", "malformed", "4 comma-separated parts", "exactly 3",
       'DCGM_FI_DEV_SM_CLOCK, gauge,"SM clock, in MHz"']]),
    (["DCGM_FI_DEV_SM_CLOCK gauge help"], [["row 1 (DCGM_FI_DEV_SM_CLOCK gauge help)", "1 comma-separated parts"]]),
    (['DCGM_FI_DEV_SM_CLOCK, gauge, "SM clock, in MHz"'],
     [["row 1 (DCGM_FI_DEV_SM_CLOCK)", "malformed", "quote after a space", "bare \" in non-quoted-field"]]),
    (['DCGM_FI_DEV_SM_CLOCK, gauge, the "SM" clock'], [["row 1", "quote inside an unquoted part"]]),
    (['DCGM_FI_DEV_SM_CLOCK, gauge,"SM" clock'], [["row 1", "text after a closing quote"]]),
    (['DCGM_FI_DEV_SM_CLOCK, gauge,"SM clock'], [["row 1", "no closing quote"]]),
    (["DCGM_FI_DEV_SM_CLOCK, gauge, a", "  # a comment"], [["row 2 (# a comment)", "first character"]]),
    (["DCGM_FI_DEV_SM_CLOCK, gauge, a", "   "], [["row 2 (?)", "line of spaces"]]),
    (["DCGM_FI_DEV_SM_CLOCK, gauge, a\nDCGM_FI_DEV_GPU_TEMP, gauge, b"], [["row 1", "line break", "one row per item"]]),
    ([{"field": "DCGM_FI_DEV_SM_CLOCK", "type": "gauge"}], [["row 1 (DCGM_FI_DEV_SM_CLOCK)", "lacks help"]]),
    ([{"field": "DCGM_FI_DEV_SM_CLOCK", "type": "gauge", "help": "a", "name": "x"}],
     [["row 1 (DCGM_FI_DEV_SM_CLOCK)", "unknown keys name"]]),
    ([("DCGM_FI_DEV_SM_CLOCK", "gauge")], [["row 1 (DCGM_FI_DEV_SM_CLOCK)", "2 items"]]),
    ([("DCGM_FI_DEV_SM_CLOCK", "gauge", None)], [["row 1 (DCGM_FI_DEV_SM_CLOCK)", "help is NoneType"]]),
    ([None], [["row 1 (?)", "not NoneType"]]),
    # nothing at all
    ([], [["no rows"]]),
    (["# only a comment", ""], [["no rows"]]),
])
def test_errors(rows, expected):
    problems = dcgm_fields.errors(rows)
    assert len(problems) == len(expected), problems
    for problem, words in zip(problems, expected):
        for word in words:
            assert word in problem, (word, problem)


def test_errors_lists_every_problem_of_a_row_and_keeps_going():
    problems = dcgm_fields.errors(["DCGM_FI_DEV_SM_CLOK, Gauge,", "bad row", "DCGM_FI_DEV_GPU_TEMP, gauge, t"])
    assert [problem.split(":")[0] for problem in problems] == [
        "row 1 (DCGM_FI_DEV_SM_CLOK)", "row 1 (DCGM_FI_DEV_SM_CLOK)", "row 1 (DCGM_FI_DEV_SM_CLOK)",
        "row 2 (bad row)"]


def test_errors_on_text_name_line_numbers():
    text = "# Format\n\nDCGM_FI_DEV_SM_CLOCK, gauge, a\nDCGM_FI_DEV_SM_CLOCK, gauge, b\n"
    assert dcgm_fields.errors(text)[0].startswith("row 4 (DCGM_FI_DEV_SM_CLOCK): duplicate field, row 3")


@pytest.mark.parametrize("name, first", [
    ("DCGM_FI_DEV_GPU_TEMPERATURE", "DCGM_FI_DEV_GPU_TEMP"),
    ("dcgm_fi_dev_fb_usd", "DCGM_FI_DEV_FB_USED"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIV", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"),
])
def test_suggestions(name, first):
    assert dcgm_fields.suggestions(name)[0] == first


# ---- merge ----

BASE = [("DCGM_FI_DEV_SM_CLOCK", "gauge", "a"), ("DCGM_FI_DEV_GPU_TEMP", "gauge", "b"),
        ("DCGM_FI_DRIVER_VERSION", "label", "c")]


@pytest.mark.parametrize("extra, expected", [
    ([], BASE),
    (["DCGM_FI_DEV_GPU_TEMP, counter, new help"],
     [BASE[0], ("DCGM_FI_DEV_GPU_TEMP", "counter", "new help"), BASE[2]]),
    ([{"field": "DCGM_FI_DEV_SM_CLOCK", "type": "gauge", "help": "SM, again"}, "DCGM_FI_DEV_FB_USED, gauge, fb"],
     [("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM, again"), BASE[1], BASE[2], ("DCGM_FI_DEV_FB_USED", "gauge", "fb")]),
    (["DCGM_FI_DEV_FB_USED, gauge, one", "DCGM_FI_DEV_FB_USED, gauge, two", "DCGM_FI_DEV_SM_CLOCK, counter, x"],
     [("DCGM_FI_DEV_SM_CLOCK", "counter", "x"), BASE[1], BASE[2], ("DCGM_FI_DEV_FB_USED", "gauge", "two")]),
])
def test_merge(extra, expected):
    merged = dcgm_fields.merge(BASE, extra)
    assert merged == as_dicts(expected)
    assert dcgm_fields.errors(merged) == []


def test_merge_into_defaults_keeps_them_untouched():
    before = list(dcgm_fields.DEFAULT_COUNTERS)
    merged = dcgm_fields.merge(dcgm_fields.DEFAULT_COUNTERS, [
        "DCGM_FI_DEV_GPU_TEMP, counter, changed", "DCGM_FI_PROF_SM_ACTIVE, gauge, SM active ratio."])
    assert dcgm_fields.DEFAULT_COUNTERS == before
    assert len(merged) == 27
    position = [field for field, _kind, _text in before].index("DCGM_FI_DEV_GPU_TEMP")
    assert merged[position] == {"field": "DCGM_FI_DEV_GPU_TEMP", "type": "counter", "help": "changed"}
    assert merged[-1]["field"] == "DCGM_FI_PROF_SM_ACTIVE"


# ---- to_csv ----

def test_to_csv_text():
    assert dcgm_fields.to_csv([BASE[0], ("DCGM_FI_DEV_GPU_TEMP", "gauge", 'the "GPU", in C')]) == (
        "# Format\n"
        "# DCGM FIELD, Prometheus metric type, help message\n"
        "DCGM_FI_DEV_SM_CLOCK, gauge, a\n"
        'DCGM_FI_DEV_GPU_TEMP, gauge,"the ""GPU"", in C"\n')
    assert dcgm_fields.to_csv([]) == dcgm_fields.HEADER


@pytest.mark.parametrize("rows", [
    dcgm_fields.DEFAULT_COUNTERS,
    BASE,
    [("DCGM_FI_DEV_SM_CLOCK", "gauge", "commas, here, and there"), ("DCGM_FI_DEV_GPU_TEMP", "gauge", '"quoted"'),
     ("DCGM_FI_DEV_FB_USED", "gauge", "# not a comment"), ("DCGM_FI_DEV_FB_FREE", "counter", 'x,"y"')],
    [("#odd", "gauge", "a"), ("\t#odd", "gauge", "b"), ("a,b", 'c"d', "e")],
])
def test_to_csv_round_trip(rows):
    text = dcgm_fields.to_csv(rows)
    assert text.startswith(dcgm_fields.HEADER) and text.endswith("\n")
    assert dcgm_fields.parse_rows(text) == as_dicts(rows)
    assert dcgm_fields.parse_rows(text.splitlines()) == as_dicts(rows)
    assert dcgm_fields.to_csv(dcgm_fields.parse_rows(text)) == text


def test_to_csv_refuses_line_breaks():
    with pytest.raises(ValueError, match="line break"):
        dcgm_fields.to_csv([("DCGM_FI_DEV_SM_CLOCK", "gauge", "two\nlines")])


# ---- metric_names ----

@pytest.mark.parametrize("rows, names", [
    (BASE, ["DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_GPU_TEMP"]),
    ([("DCGM_FI_DRIVER_VERSION", "label", "d"), ("DCGM_FI_DEV_SERIAL", "label", "s")], []),
    (["DCGM_FI_DEV_XID_ERRORS, gauge, x", "DCGM_EXP_XID_ERRORS_COUNT, counter, y", "# DCGM_FI_DEV_FB_USED, gauge, f"],
     ["DCGM_FI_DEV_XID_ERRORS", "DCGM_EXP_XID_ERRORS_COUNT"]),
    ([("DCGM_FI_DEV_SM_CLOCK", "gauge", "a"), ("DCGM_FI_DEV_SM_CLOCK", "counter", "b")], ["DCGM_FI_DEV_SM_CLOCK"]),
])
def test_metric_names(rows, names):
    assert dcgm_fields.metric_names(rows) == names


def test_metric_names_of_defaults():
    names = dcgm_fields.metric_names(dcgm_fields.DEFAULT_COUNTERS)
    assert len(names) == 25
    assert "DCGM_FI_DRIVER_VERSION" not in names
    assert names[0] == "DCGM_FI_DEV_SM_CLOCK" and names[-1] == "DCGM_FI_PROF_PCIE_RX_BYTES"
