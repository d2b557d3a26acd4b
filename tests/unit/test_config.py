"""Configuration parsing: S3A keys, sizes, enums with helpful errors, validation of every option."""

import pytest

from s3commit.config.options import (
    KEYS,
    MIB,
    CommitterName,
    CommitterOptions,
    ConflictMode,
    StoreOptions,
    committer_name_from_conf,
    parse_size,
    resolve_threads,
)
from s3commit.errors import ConfigError
from s3commit.model.uri import S3Uri


def test_every_key_has_a_default_and_a_reason():
    for key in KEYS.values():
        assert key.why and len(key.why) > 20, key.name


@pytest.mark.parametrize(("text", "size"), [("64M", 64 * MIB), ("5m", 5 * MIB), ("1G", 1024 * MIB),
                                            ("8388608", 8388608), ("128MB", 128 * MIB), ("2k", 2048)])
def test_sizes_parse_like_hadoop(text, size):
    assert parse_size(text, what="x") == size


def test_bad_size_names_the_key():
    with pytest.raises(ConfigError, match=r"fs\.s3a\.multipart\.size"):
        parse_size("lots", what="fs.s3a.multipart.size")


def test_unknown_committer_name_lists_valid_values():
    with pytest.raises(ConfigError, match="Valid values are: magic, directory, partitioned"):
        committer_name_from_conf({"fs.s3a.committer.name": "file"})


def test_conflict_mode_is_case_insensitive_and_rejects_merge():
    assert ConflictMode.parse("REPLACE", what="m") is ConflictMode.REPLACE
    with pytest.raises(ConfigError, match="'merge' is not a valid"):
        CommitterOptions(conflict_mode="merge")


def test_default_conflict_mode_is_append_as_in_hadoop():
    assert CommitterOptions().conflict_mode is ConflictMode.APPEND
    assert CommitterOptions.from_hadoop_conf({}).conflict_mode is ConflictMode.APPEND


def test_part_size_below_five_mib_is_rejected_with_the_limit():
    with pytest.raises(ConfigError, match="5 MiB"):
        CommitterOptions(part_size=4 * MIB)


def test_committer_options_from_s3a_keys():
    opts = CommitterOptions.from_hadoop_conf({
        "fs.s3a.committer.threads": "-2", "fs.s3a.multipart.size": "16M",
        "fs.s3a.committer.staging.conflict-mode": "fail", "fs.s3a.committer.staging.unique-filenames": "false",
        "mapreduce.fileoutputcommitter.marksuccessfuljobs": "false", "s3commit.commit.rate-limit": "100",
    })
    assert opts.threads == -2 and opts.pool_size >= 2
    assert opts.part_size == 16 * MIB
    assert opts.conflict_mode is ConflictMode.FAIL
    assert not opts.unique_filenames and not opts.success_marker
    assert opts.rate_limit == 100


def test_negative_threads_mean_times_cores_and_zero_means_one():
    assert resolve_threads(0) == 1
    assert resolve_threads(-1) >= 1
    assert resolve_threads(8) == 8


def test_store_options_from_s3a_keys_map_encryption_and_endpoint():
    opts = StoreOptions.from_hadoop_conf({
        "fs.s3a.endpoint": "127.0.0.1:9000", "fs.s3a.path.style.access": "true",
        "fs.s3a.access.key": "AK", "fs.s3a.secret.key": "SK", "fs.s3a.encryption.algorithm": "SSE-KMS",
        "fs.s3a.encryption.key": "kms-1", "fs.s3a.create.storage.class": "STANDARD_IA",
    })
    assert opts.endpoint_url == "https://127.0.0.1:9000"
    assert opts.path_style
    assert opts.write_args() == {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "kms-1",
                                 "StorageClass": "STANDARD_IA"}


def test_credentials_never_show_in_repr():
    opts = StoreOptions(access_key="AKIDSECRETLOOKING", secret_key="verysecret", session_token="tok")
    text = repr(opts)
    assert "AKIDSECRETLOOKING" not in text and "verysecret" not in text and "tok" not in text


def test_bad_encryption_algorithm_lists_valid_values():
    with pytest.raises(ConfigError, match="Valid values are: SSE-S3, SSE-KMS"):
        StoreOptions.from_hadoop_conf({"fs.s3a.encryption.algorithm": "rot13"})


def test_committer_names_include_the_rename_baselines():
    assert {n.value for n in CommitterName} == {"magic", "directory", "partitioned", "rename-v1", "rename-v2"}


@pytest.mark.parametrize(("uri", "bucket", "key"), [("s3://b1/a/b/", "b1", "a/b"), ("s3a://b2", "b2", ""),
                                                    ("s3://b3/x", "b3", "x")])
def test_uris_parse(uri, bucket, key):
    parsed = S3Uri.parse(uri)
    assert (parsed.bucket, parsed.key) == (bucket, key)


@pytest.mark.parametrize("bad", ["", "/local/path", "hdfs://nn/x", "s3:///nobucket", "file:///tmp"])
def test_non_s3_destinations_are_rejected(bad):
    with pytest.raises(ConfigError):
        S3Uri.parse(bad)


def test_uri_relative_and_containment():
    dest = S3Uri.parse("s3://b/out")
    assert dest.contains_key("out/x") and not dest.contains_key("outer/x") and not dest.contains_key("out/")
    assert dest.relative("out/y=1/f") == "y=1/f"
    assert S3Uri.parse("s3://b").contains_key("anything")


def test_stream_options_are_parsed_once_for_the_jvm():
    from s3commit.config.jvm_streams import ReadPolicy, StreamOptions, UploadBuffer

    default = StreamOptions.from_hadoop_conf({})
    assert default.read_policy is ReadPolicy.NORMAL and default.upload_buffer is UploadBuffer.DISK
    assert default.prefetch_block_size == 8 * 1024 * 1024 and default.readahead == 64 * 1024
    assert default.to_wire()["prefetch_max_block_size"] == 8 * 1024 * 1024  # no growth: 8 blocks of 8 MiB in flight
    assert default.to_wire()["prefetch_block_count"] == 8
    assert default.to_wire()["prefetch_max_ahead"] == 64 * 1024 * 1024
    # blocks never shrink: a maximum below the block size means no growth
    big = StreamOptions.from_hadoop_conf({"fs.s3a.prefetch.block.size": "64M"})
    assert big.to_wire()["prefetch_max_block_size"] == 64 * 1024 * 1024
    with pytest.raises(ConfigError, match=r"s3commit\.prefetch\.max-block-size"):
        StreamOptions.from_hadoop_conf({"s3commit.prefetch.max-block-size": "1G"})
    with pytest.raises(ConfigError, match=r"s3commit\.prefetch\.max-ahead"):
        StreamOptions.from_hadoop_conf({"s3commit.prefetch.max-ahead": "0"})
    tuned = StreamOptions.from_hadoop_conf({"fs.s3a.experimental.input.fadvise": "Whole-File",
                                            "fs.s3a.prefetch.block.size": "16M", "fs.s3a.fast.upload.buffer": "array",
                                            "fs.s3a.vectored.read.min.seek.size": "0"})
    assert tuned.read_policy is ReadPolicy.SEQUENTIAL and tuned.prefetch_block_size == 16 * 1024 * 1024
    assert tuned.to_wire()["upload_buffer"] == "array" and tuned.vectored_min_seek == 0
    with pytest.raises(ConfigError, match=r"fs\.s3a\.fast\.upload\.buffer.*Valid values are: disk, array, bytebuffer"):
        StreamOptions.from_hadoop_conf({"fs.s3a.fast.upload.buffer": "tape"})
    with pytest.raises(ConfigError, match=r"fs\.s3a\.experimental\.input\.fadvise"):
        StreamOptions.from_hadoop_conf({"fs.s3a.experimental.input.fadvise": "backwards"})
    with pytest.raises(ConfigError, match=r"fs\.s3a\.readahead\.range"):
        StreamOptions.from_hadoop_conf({"fs.s3a.readahead.range": "lots"})


def test_the_etag_check_follows_what_the_store_was_seen_to_validate_unless_chosen():
    from s3commit.config.options import StoreOptions
    from s3commit.store.capabilities import Capabilities, Finding, Outcome
    from s3commit.store.s3store import S3Store

    def seen(crc32: Outcome, etag_md5: Outcome = Outcome.YES) -> Capabilities:
        return Capabilities("http://store", "b", 0.0, {"checksum-crc32": Finding(crc32),
                                                       "part-etag-md5": Finding(etag_md5)})

    store = S3Store(StoreOptions(endpoint_url="https://s3.eu-west-1.amazonaws.com", checksum_algorithm="CRC32"))
    assert store.bodies.verifies_etags("b")  # never probed: the safe way, whatever the endpoint's name
    store.capabilities["b"] = seen(Outcome.HONOURED)
    assert not store.bodies.verifies_etags("b")  # the store validates the CRC32 sent
    store.capabilities["b"] = seen(Outcome.IGNORED)
    assert store.bodies.verifies_etags("b")
    store.capabilities["b"] = seen(Outcome.IGNORED, Outcome.NO)
    assert not store.bodies.verifies_etags("b")  # its ETags are no MD5s: nothing to compare
    crc32c = S3Store(StoreOptions(checksum_algorithm="CRC32C"))
    crc32c.capabilities["b"] = seen(Outcome.HONOURED)  # nor of CRC32C: each algorithm is probed on its own
    assert crc32c.bodies.verifies_etags("b")
    assert S3Store(StoreOptions(verify_etag=True)).bodies.verifies_etags("b")
    assert not S3Store(StoreOptions(verify_etag=False)).bodies.verifies_etags("b")
    assert not S3Store(StoreOptions(verify_etag=True, sse_algorithm="aws:kms")).bodies.verifies_etags("b")
    sha = S3Store(StoreOptions(checksum_algorithm="SHA256"))
    sha.capabilities["b"] = seen(Outcome.HONOURED)  # CRC32 validated says nothing of SHA256
    assert sha.bodies.verifies_etags("b")
    conf = {"fs.s3a.endpoint": "http://127.0.0.1:9000"}
    assert StoreOptions.from_hadoop_conf(conf).verify_etag is None
    assert StoreOptions.from_hadoop_conf({**conf, "s3commit.checksum.verify-etag": "false"}).verify_etag is False
    assert StoreOptions.from_hadoop_conf({**conf, "s3commit.capabilities.cache": "0"}).capabilities_max_age == 0
    with pytest.raises(ConfigError, match=r"s3commit\.capabilities\.cache"):
        StoreOptions.from_hadoop_conf({"s3commit.capabilities.cache": "-1"})



def test_the_options_parsed_from_no_key_are_the_dataclasses_defaults():
    # Each default is written once, in KEYS; a field's default is parsed from it (config.options.setting).
    from s3commit.config.jvm_streams import StreamOptions
    from s3commit.config.options import RetryPolicy

    assert CommitterOptions.from_hadoop_conf({}) == CommitterOptions()
    assert StoreOptions.from_hadoop_conf({}) == StoreOptions()
    assert StoreOptions.from_hadoop_conf({}).retry == RetryPolicy()
    assert StreamOptions.from_hadoop_conf({}) == StreamOptions()


def test_a_key_set_changes_its_field_and_the_defaults_are_keys_defaults():
    assert CommitterOptions.from_hadoop_conf({"s3commit.job.liveness": "90s"}).job_liveness == 90.0
    assert StoreOptions.from_hadoop_conf({"fs.s3a.attempts.maximum": "3"}).retry.max_attempts == 3
    assert StoreOptions.from_hadoop_conf({"s3commit.checksum.verify-etag": "true"}).verify_etag is True
    defaults = StoreOptions()
    assert defaults.verify_etag is None and defaults.capabilities_max_age == 86400.0
    assert defaults.retry.max_attempts == 7 and defaults.max_pool_connections == 64 and defaults.use_ssl
    assert (defaults.connect_timeout, defaults.read_timeout) == (10.0, 60.0)
    assert CommitterOptions().part_size == 64 * MIB and CommitterOptions().threads == 32
    assert CommitterOptions().lease_wait == 1200.0 and CommitterOptions().job_liveness == 600.0


def test_s3commits_cache_directory_has_one_rule(monkeypatch, tmp_path):
    from s3commit.config.local_cache import user_cache_dir
    from s3commit.store import capability_cache

    monkeypatch.delenv(capability_cache.DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert user_cache_dir() == tmp_path / "xdg" / "s3commit"
    assert capability_cache.cache_dir() == tmp_path / "xdg" / "s3commit" / "capabilities"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert user_cache_dir() == tmp_path / ".cache" / "s3commit"
    monkeypatch.setenv(capability_cache.DIR_ENV, str(tmp_path / "elsewhere"))
    assert capability_cache.cache_dir() == tmp_path / "elsewhere"
