"""Fuzzing the farm config loader (``load_farm_config``) and the TLS files it names: whatever ``farm.toml`` or a PEM
file holds, the result is a :class:`FarmTLS` or one :class:`InvalidArgument` (``FileFormatError`` for the config
file) in one printable line. ``HYPOTHESIS_PROFILE=nightly`` runs more examples."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyhil.device_farm.cluster.certs import make_certs
from tinyhil.device_farm.cluster.security import FarmTLS, load_farm_config
from tinyhil.errors import InvalidArgument

pytestmark = pytest.mark.fuzz

_FILES: Final = ["ca.pem", "me.pem", "me.key", "other.key", "g.pem", "missing.pem", "", ".", "../x", "\x1b[2J"]
_KEYS: Final = ["security", "ca", "cert", "key", "ciphers", "x"]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lab's CA, two hosts' certificates and keys, and a file of garbage, side by side."""
    directory = tmp_path_factory.mktemp("lab")
    made = make_certs(directory / "made", ["me", "other"])
    shutil.copyfile(made.ca, directory / "ca.pem")
    for host, (cert, key) in made.hosts.items():
        shutil.copyfile(cert, directory / f"{host}.pem")
        shutil.copyfile(key, directory / f"{host}.key")
    (directory / "g.pem").write_bytes(b"-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n")
    return directory


@contextmanager
def _beside(lab: Path, name: str, data: bytes) -> Iterator[Path]:
    """A copy of ``lab`` holding ``data`` as ``name``."""
    with tempfile.TemporaryDirectory() as folder:
        here = Path(folder) / "lab"
        shutil.copytree(lab, here)
        (here / name).write_bytes(data)
        yield here / name


def _only_typed(load: object) -> None:
    try:
        assert callable(load)
        load()
    except InvalidArgument as exc:
        message = str(exc)
        assert message and "\n" not in message and "\x1b" not in message


_scalars = st.one_of(st.sampled_from(_FILES), st.text(max_size=8), st.integers(-(2**70), 2**70), st.booleans())
_tables = st.dictionaries(st.sampled_from(_KEYS) | st.text(max_size=4), _scalars, max_size=4)


def _config(document: dict[str, dict[str, object]]) -> str:
    lines = []
    for name, table in document.items():
        lines.append(f"[{json.dumps(name)}]")
        lines.extend(f"{json.dumps(key)} = {json.dumps(value)}" for key, value in table.items())
    return "\n".join(lines) + "\n"


_documents = st.one_of(
    st.binary(max_size=200).map(lambda data: data.decode("latin-1")),
    st.dictionaries(st.sampled_from(_KEYS), _tables, max_size=2).map(_config),
)


@given(document=_documents)
def test_any_farm_config_is_tls_or_one_typed_error(lab: Path, document: str) -> None:
    with _beside(lab, "farm.toml", document.encode("utf-8", "surrogatepass")) as config:
        _only_typed(lambda: load_farm_config(config))


@given(name=st.sampled_from(["ca.pem", "me.pem", "me.key"]), data=st.binary(max_size=400))
def test_any_tls_file_is_tls_or_one_typed_error(lab: Path, name: str, data: bytes) -> None:
    with _beside(lab, name, data) as changed:
        here = changed.parent
        _only_typed(lambda: FarmTLS(here / "ca.pem", here / "me.pem", here / "me.key"))
