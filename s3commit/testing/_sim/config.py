"""What the simulator does to requests (:class:`SimulatorConfig`), changed at run time through its control API."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from s3commit.testing._sim.faults import NO_FAULTS, FaultSpec
from s3commit.testing._sim.profiles import NO_LATENCY, LatencyProfile, ThrottleSpec, get_profile

_CONFIG_KEYS = ("profile", "faults", "seed", "copy_bandwidth", "throttle", "clock_offset", "validate_checksums",
               "conditional_deletes")


@dataclass(frozen=True, kw_only=True)
class SimulatorConfig:
    """What the simulator does to requests.

    Attributes:
        profile: the latency model.
        faults: fault rates.
        seed: seed of the fault streams (see :mod:`~s3commit.testing._sim.faults` for what is deterministic).
        copy_bandwidth: server-side copy rate in bytes/s, overriding the profile's; ``None`` keeps it.
        throttle: per-prefix request-rate limits, or ``None`` for no throttling.
        clock_offset: seconds the store's clock is ahead of ours (its Date, Last-Modified and listed dates).
        validate_checksums: answer a PutObject or UploadPart whose ``x-amz-checksum-*`` header does not match the
            bytes received with 400 BadDigest, as S3 does (moto accepts any; off by default, as the suite was
            written against moto's behaviour).
        conditional_deletes: honour ``If-Match`` on DeleteObject (as S3 does); False: drop it before moto sees it,
            as a store that honours conditional PUTs but not conditional DELETEs does (gofakes3 1.2).
    """

    profile: LatencyProfile = NO_LATENCY
    faults: FaultSpec = NO_FAULTS
    seed: int = 0
    copy_bandwidth: float | None = None
    throttle: ThrottleSpec | None = None
    clock_offset: float = 0.0
    validate_checksums: bool = False
    conditional_deletes: bool = True

    def __post_init__(self) -> None:
        if self.copy_bandwidth is not None and self.copy_bandwidth <= 0:
            raise ValueError(f"copy_bandwidth must be > 0 bytes/s or None, got {self.copy_bandwidth}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`updated` accepts it (or any subset of its keys)."""
        return {
            "profile": self.profile.to_dict(),
            "faults": self.faults.to_dict(),
            "seed": self.seed,
            "copy_bandwidth": self.copy_bandwidth,
            "throttle": self.throttle.to_dict() if self.throttle else None, "clock_offset": self.clock_offset,
            "validate_checksums": self.validate_checksums, "conditional_deletes": self.conditional_deletes}

    def updated(self, changes: Mapping[str, Any]) -> SimulatorConfig:
        """Return a copy with the JSON-style ``changes`` applied; keys absent from ``changes`` stay.

        ``profile`` is a profile name or a :meth:`LatencyProfile.to_dict` dict; ``faults`` and ``throttle``
        are ``to_dict`` dicts or ``None`` (none); ``seed`` an int; ``copy_bandwidth`` a number or ``None``.

        Raises:
            ValueError: an unknown key or an invalid value.
        """
        unknown = set(changes) - set(_CONFIG_KEYS)
        if unknown:
            raise ValueError(
                f"unknown simulator config keys {sorted(unknown)}; valid keys are {', '.join(_CONFIG_KEYS)}"
            )
        values: dict[str, Any] = {}
        if "profile" in changes:
            profile = changes["profile"]
            values["profile"] = get_profile(profile) if isinstance(profile, str) else LatencyProfile.from_dict(profile)
        if "faults" in changes:
            values["faults"] = FaultSpec.from_dict(changes["faults"]) if changes["faults"] else NO_FAULTS
        if "seed" in changes:
            values["seed"] = int(changes["seed"])
        if "copy_bandwidth" in changes:
            bandwidth = changes["copy_bandwidth"]
            values["copy_bandwidth"] = float(bandwidth) if bandwidth is not None else None
        if "throttle" in changes:
            throttle = changes["throttle"]
            values["throttle"] = ThrottleSpec.from_dict(throttle) if throttle else None
        values.update({"clock_offset": float(changes["clock_offset"])} if "clock_offset" in changes else {})
        if "validate_checksums" in changes:
            values["validate_checksums"] = bool(changes["validate_checksums"])
        if "conditional_deletes" in changes:
            values["conditional_deletes"] = bool(changes["conditional_deletes"])
        return dataclasses.replace(self, **values)
