"""The lab cluster's certificates and keys, generated once per lab (a new CA every `kube up`
after a `kube down`): the CA, the API server's serving certificate, client certificates for the
controller manager, the scheduler, the API server's calls to kubelets and each node's kubelet
(system:node:NAME in system:nodes, for the Node authorizer), and the service-account key pair."""

import datetime
import ipaddress
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 365


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _pem_cert(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


def _write(path, data, mode=0o600):
    tmp = path + ".tmp"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _name(cn, orgs=()):
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    return x509.Name(attrs + [x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _now():
    return datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)


class PKI:
    """Reads or creates the lab's CA in DIRECTORY and issues certificates from it."""

    def __init__(self, directory):
        self.dir = directory
        os.makedirs(directory, mode=0o700, exist_ok=True)
        ca_crt, ca_key = self.path("ca.crt"), self.path("ca.key")
        if not (os.path.exists(ca_crt) and os.path.exists(ca_key)):
            key = _key()
            name = _name("gpuops-lab-ca")
            cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                    .public_key(key.public_key()).serial_number(x509.random_serial_number())
                    .not_valid_before(_now()).not_valid_after(_now() + datetime.timedelta(days=VALID_DAYS))
                    .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                    .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                    .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                 content_commitment=False, key_encipherment=False,
                                                 data_encipherment=False, key_agreement=False,
                                                 encipher_only=False, decipher_only=False), critical=True)
                    .sign(key, hashes.SHA256()))
            _write(ca_key, _pem_key(key))
            _write(ca_crt, _pem_cert(cert), 0o644)
        with open(ca_key, "rb") as f:
            self.ca_key = serialization.load_pem_private_key(f.read(), None)
        with open(ca_crt, "rb") as f:
            self.ca_cert = x509.load_pem_x509_certificate(f.read())
        try:
            self.ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
        except x509.ExtensionNotFound:
            raise SystemExit(f"the lab's CA ({ca_crt}) predates key identifiers, which Python 3.13's strict "
                             "certificate checks need: run `make lab-down` (it removes the cluster and its "
                             "certificates), then make lab or make test again") from None

    def path(self, name):
        return os.path.join(self.dir, name)

    def issue(self, name, cn, orgs=(), server_names=(), server_ips=(), client=True, server=False):
        """Writes NAME.crt and NAME.key (kept when they exist); returns their paths."""
        crt, key_path = self.path(name + ".crt"), self.path(name + ".key")
        if os.path.exists(crt) and os.path.exists(key_path):
            return crt, key_path
        key = _key()
        usages = ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else []) + \
            ([ExtendedKeyUsageOID.SERVER_AUTH] if server else [])
        builder = (x509.CertificateBuilder().subject_name(_name(cn, orgs)).issuer_name(self.ca_cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(_now()).not_valid_after(_now() + datetime.timedelta(days=VALID_DAYS))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
                   # (as kubeadm's: Python 3.13's ssl verifies strictly and refuses a chain without them)
                   .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.ca_key.public_key()),
                                  critical=False))
        sans = [x509.DNSName(n) for n in server_names] + \
            [x509.IPAddress(ipaddress.ip_address(i)) for i in server_ips]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.ca_key, hashes.SHA256())
        _write(key_path, _pem_key(key))
        _write(crt, _pem_cert(cert), 0o644)
        return crt, key_path

    def service_account_keys(self):
        """sa.key / sa.pub: the key pair that signs and verifies service-account tokens."""
        priv, pub = self.path("sa.key"), self.path("sa.pub")
        if not (os.path.exists(priv) and os.path.exists(pub)):
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            _write(priv, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                           serialization.NoEncryption()))
            _write(pub, key.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo), 0o644)
        return priv, pub
