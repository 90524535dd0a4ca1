"""SCRAM credentials kept in the broker's metadata (DescribeUserScramCredentials and
AlterUserScramCredentials, KIP-554; ``kafka-configs --alter --add-config 'SCRAM-SHA-256=[...]'``).

As in Kafka, the password never reaches the broker: the client salts and hashes it (PBKDF2 with
its own salt and iteration count) and sends the salted password; the broker keeps only what
SCRAM's server side needs, the salt, the iteration count, the stored key and the server key
(RFC 5802), from which the password cannot be recovered. They live in
``<log_dir>/scram-credentials.json`` (mode 0600, written atomically), so they survive restarts.

These are the SCRAM users besides the PLAIN users of the listener's JAAS config, from which the
broker derives SCRAM credentials too (sasl.py); a stored credential wins over a derived one.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

from kafka_spark.broker.storage import checkpoint

CREDENTIALS_FILE = "scram-credentials.json"
#: Kafka's ScramMechanism codes (DescribeUserScramCredentials / AlterUserScramCredentials).
MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {code: name for name, code in MECHANISM_CODES.items()}
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: Kafka's bounds on a credential's iterations (ScramMechanism minIterations / maxIterations).
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384


class CredentialError(ValueError):
    """A credential Kafka would refuse to store; the message says which and why."""


class CredentialStore:
    """user -> mechanism -> (salt, iterations, stored key, server key). Event loop only."""

    def __init__(self, log_dir: Path) -> None:
        self._path = Path(log_dir) / CREDENTIALS_FILE
        self._users: dict[str, dict[str, dict[str, Any]]] = {}
        if self._path.exists():
            try:
                self._users = json.loads(self._path.read_bytes())["users"]
            except (ValueError, KeyError, TypeError) as error:
                raise ValueError(
                    f"{self._path} does not hold this broker's SCRAM credentials ({error}); restore "
                    "it from a backup, or move it away and set the users' credentials again"
                ) from None

    def users(self) -> dict[str, dict[str, int]]:
        """user -> mechanism -> iterations (what DescribeUserScramCredentials reports)."""
        return {
            user: {mechanism: int(entry["iterations"]) for mechanism, entry in mechanisms.items()}
            for user, mechanisms in self._users.items()
        }

    def get(self, mechanism: str, user: str) -> tuple[bytes, int, bytes, bytes] | None:
        """``(salt, iterations, stored key, server key)`` or None."""
        entry = self._users.get(user, {}).get(mechanism)
        if entry is None:
            return None
        return (
            base64.b64decode(entry["salt"]),
            int(entry["iterations"]),
            base64.b64decode(entry["stored_key"]),
            base64.b64decode(entry["server_key"]),
        )

    def upsert(self, user: str, mechanism: str, iterations: int, salt: bytes, salted_password: bytes) -> None:
        """Store the credential derived from a client-salted password (persisted on return);
        CredentialError (see :func:`validate`) stores nothing."""
        validate(user, mechanism, iterations, salt, salted_password)
        hash_name = HASHES[mechanism]
        client_key = hmac.new(salted_password, b"Client Key", hash_name).digest()
        self._users.setdefault(user, {})[mechanism] = {
            "salt": base64.b64encode(salt).decode(),
            "iterations": iterations,
            "stored_key": base64.b64encode(hashlib.new(hash_name, client_key).digest()).decode(),
            "server_key": base64.b64encode(hmac.new(salted_password, b"Server Key", hash_name).digest()).decode(),
        }
        self._save()

    def delete(self, user: str, mechanism: str) -> bool:
        """Remove a credential; False when there was none (persisted on return)."""
        mechanisms = self._users.get(user, {})
        if mechanism not in mechanisms:
            return False
        del mechanisms[mechanism]
        if not mechanisms:
            del self._users[user]
        self._save()
        return True

    def _save(self) -> None:
        checkpoint.atomic_write(
            self._path, json.dumps({"version": 1, "users": self._users}, indent=1, sort_keys=True).encode(), mode=0o600
        )


def validate(user: str, mechanism: str, iterations: int, salt: bytes, salted_password: bytes) -> None:
    """CredentialError naming what Kafka would not accept in a credential."""
    if not user:
        raise CredentialError("a SCRAM credential needs a user name")
    if mechanism not in HASHES:
        raise CredentialError(f"unknown SCRAM mechanism {mechanism!r}; use {' or '.join(HASHES)}")
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise CredentialError(
            f"{mechanism} of {user}: {iterations} iterations; use {MIN_ITERATIONS} to {MAX_ITERATIONS}"
        )
    if not salt or not salted_password:
        raise CredentialError(f"{mechanism} of {user}: the salt and the salted password may not be empty")


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """What a client sends in AlterUserScramCredentials: PBKDF2 of the password (RFC 5802's Hi)."""
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode(), salt, iterations)
