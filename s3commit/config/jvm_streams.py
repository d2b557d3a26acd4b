"""How the JVM's ``s3a://`` streams read and buffer (S3A's input policies, ``fs.s3a.fast.upload.buffer``,
prefetching and vectored reads): parsed from the Hadoop configuration once, in Python, and sent to the JVM when it
registers a configuration, so that the Java side has no defaults of its own. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from s3commit.config.options import ValuedEnum, setting, settings
from s3commit.config.values import MIB, parse_int, parse_size
from s3commit.errors import ConfigError


class ReadPolicy(ValuedEnum):
    """S3A's input policies (``fs.s3a.experimental.input.fadvise``)."""

    NORMAL = "normal"
    SEQUENTIAL = "sequential"
    RANDOM = "random"


class UploadBuffer(ValuedEnum):
    """S3A's ``fs.s3a.fast.upload.buffer``: where a part waits to be uploaded."""

    DISK = "disk"
    ARRAY = "array"
    BYTEBUFFER = "bytebuffer"


_POSITIVE = {"readahead": "fs.s3a.readahead.range", "prefetch_block_size": "fs.s3a.prefetch.block.size",
             "prefetch_block_count": "fs.s3a.prefetch.block.count",
             "prefetch_max_block_size": "s3commit.prefetch.max-block-size",
             "prefetch_max_ahead": "s3commit.prefetch.max-ahead",
             "vectored_max_merged": "fs.s3a.vectored.read.max.merged.size"}
"""The options that must be at least 1, by the key each is read from."""


def _parse_read_policy(text: str, *, what: str) -> ReadPolicy:
    """S3A's input policy, its other names (``adaptive``, ``default``, ``whole-file``) included."""
    policy = text.lower()
    return ReadPolicy.parse({"adaptive": "normal", "default": "normal", "whole-file": "sequential"}
                            .get(policy, policy), what=what)


@dataclass(frozen=True, kw_only=True)
class StreamOptions:
    """How the JVM's ``s3a://`` streams read and buffer: parsed here once, sent to the JVM when it registers
    a configuration (``conf.register``), so the Java side has no defaults of its own."""

    read_policy: ReadPolicy = setting("fs.s3a.experimental.input.fadvise", _parse_read_policy)
    readahead: int = setting("fs.s3a.readahead.range", parse_size)
    prefetch_block_size: int = setting("fs.s3a.prefetch.block.size", parse_size)
    prefetch_block_count: int = setting("fs.s3a.prefetch.block.count", parse_int)
    prefetch_max_block_size: int = setting("s3commit.prefetch.max-block-size", parse_size)
    prefetch_max_ahead: int = setting("s3commit.prefetch.max-ahead", parse_size)
    vectored_min_seek: int = setting("fs.s3a.vectored.read.min.seek.size", parse_size)
    vectored_max_merged: int = setting("fs.s3a.vectored.read.max.merged.size", parse_size)
    upload_buffer: UploadBuffer = setting("fs.s3a.fast.upload.buffer", UploadBuffer.parse)

    def __post_init__(self) -> None:
        for name, key in _POSITIVE.items():
            if getattr(self, name) < 1:
                raise ConfigError(f"{key} must be >= 1, got {getattr(self, name)}")
        if self.prefetch_block_size > 256 * MIB:
            raise ConfigError(f"fs.s3a.prefetch.block.size {self.prefetch_block_size} is above 256M")
        if self.prefetch_max_block_size > 256 * MIB:
            raise ConfigError(f"s3commit.prefetch.max-block-size {self.prefetch_max_block_size} is above 256M")
        if self.prefetch_max_ahead > 2 * 1024 * MIB - 1:
            raise ConfigError(f"s3commit.prefetch.max-ahead {self.prefetch_max_ahead} is 2G or more")
        if self.vectored_min_seek < 0:
            raise ConfigError(f"fs.s3a.vectored.read.min.seek.size must be >= 0, got {self.vectored_min_seek}")

    @classmethod
    def from_hadoop_conf(cls, conf: Mapping[str, str]) -> StreamOptions:
        return cls(**settings(cls, conf))

    def to_wire(self) -> dict[str, Any]:
        """What the JVM reads (``S3FileSystem``)."""
        return {"read_policy": self.read_policy.value, "readahead": self.readahead,
                "prefetch_block_size": self.prefetch_block_size, "prefetch_block_count": self.prefetch_block_count,
                "prefetch_max_block_size": max(self.prefetch_block_size, self.prefetch_max_block_size),
                "prefetch_max_ahead": self.prefetch_max_ahead,
                "vectored_min_seek": self.vectored_min_seek, "vectored_max_merged": self.vectored_max_merged,
                "upload_buffer": self.upload_buffer.value}
