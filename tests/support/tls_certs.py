"""A throwaway certificate authority for TLS tests: a CA, a broker certificate for localhost and
127.0.0.1 (key and chain in one PEM file, as Kafka's ssl.keystore.type=PEM reads it) and a client
certificate, written as PEM files."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Pki:
    ca: Path  # the CA certificate (clients trust it)
    broker: Path  # the broker's key, certificate and the CA, one PEM file
    client_cert: Path
    client_key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(subject: str, key, issuer: str, issuer_key, *, ca: bool = False, san=None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = _certificate("pylog test CA", ca_key, "pylog test CA", ca_key, ca=True)
    broker_key = ec.generate_private_key(ec.SECP256R1())
    broker_cert = _certificate(
        "localhost",
        broker_key,
        "pylog test CA",
        ca_key,
        san=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )
    client_key = ec.generate_private_key(ec.SECP256R1())
    client_cert = _certificate("pylog test client", client_key, "pylog test CA", ca_key)

    def key_bytes(key) -> bytes:
        return key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())

    pki = Pki(directory / "ca.pem", directory / "broker.pem", directory / "client.pem", directory / "client.key")
    pki.ca.write_bytes(ca_cert.public_bytes(pem))
    pki.broker.write_bytes(key_bytes(broker_key) + broker_cert.public_bytes(pem) + ca_cert.public_bytes(pem))
    pki.client_cert.write_bytes(client_cert.public_bytes(pem))
    pki.client_key.write_bytes(key_bytes(client_key))
    return pki
