"""A run's certificate: a few lines a paper can print, equal for the same exact-mode run on any
machine. Only what the run computed enters its digests (never the backend, thread count or
command line): the record lines and the final step's parameter and buffer digests."""
from __future__ import annotations

import hashlib
import json

from torchlean.audit.recordfile import Record


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def final_parameters(rec: Record) -> str:
    """The digest of (name, shape, value digest) of every parameter and buffer after the last
    optimizer step ('none' when the run took no step)."""
    last = next((r for r in reversed(rec.records) if r[0] == "S"), None)
    if last is None:
        return "none"
    return _sha(json.dumps([[e[0], e[1], e[3]] for e in last[5]], separators=(",", ":")))


def certificate(rec: Record) -> list[str]:
    h = rec.header
    modes = rec.trailer.get("modes") or [h.get("mode")]
    return [f"torchlean {h.get('torchlean')}",
            f"exact_version {h.get('exact_version')}",
            f"registry {h.get('registry')}",
            f"mode {', '.join(modes)}",
            f"steps {rec.steps}",
            f"ops {rec.ops}",
            f"final parameters {final_parameters(rec)}",
            f"record {_sha(chr(10).join(rec.lines))}"]
