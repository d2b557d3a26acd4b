"""The store: the only package that talks to S3 (boto3).

:class:`S3Store` (:mod:`.s3store`) is the one choke point: every request goes through it, with its retry
semantics declared (:mod:`.retry`, tenacity, the one retry owner), errors translated once
(:mod:`s3commit.errors`) and counted (:mod:`.counters`). It is composed of one collaborator per concept:
objects (:mod:`.objects`), multipart uploads (:mod:`.uploads`), writes that check first (:mod:`.conditional`), each
sending through :mod:`.requests`; how bodies are signed and sent (:mod:`.body_policy`, :mod:`.signing`), ranged GETs
(:mod:`.ranged_gets`), the boto3 client (:mod:`.client`, :mod:`.redact`). What a store honours is measured by a
probe (:mod:`.probe`), expressed as :mod:`.capabilities` and cached per endpoint and bucket
(:mod:`.capability_cache`); :mod:`.moto_inprocess` meets moto's in-process mock where users test with it.

May import: :mod:`s3commit.config`, :mod:`s3commit.model`, :mod:`s3commit.errors`.
"""

from s3commit.store.counters import StoreCounters
from s3commit.store.objects import DELETE_BATCH
from s3commit.store.s3store import S3Store

__all__ = ["DELETE_BATCH", "S3Store", "StoreCounters"]
