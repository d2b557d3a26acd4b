"""The table of S3A's keys (what s3commit does with each) covers every key Hadoop defines a default for, is the
one docs/spark.md shows, and drives the one warning naming the settings s3commit does not support."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from s3commit.config.options import KEYS
from s3commit.config.s3a_keys import S3A_KEYS, Treatment, lookup, markdown_table, unsupported, warning

DOCS = Path(__file__).resolve().parents[2] / "docs" / "spark.md"


def core_default_s3a_keys() -> list[str]:
    """Every ``fs.s3a.*`` key of Hadoop's core-default.xml, in the installed PySpark's Hadoop."""
    pyspark = pytest.importorskip("pyspark")
    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    if not jars:
        pytest.skip("no hadoop-client-api jar beside pyspark")
    with zipfile.ZipFile(jars[-1]) as jar:
        root = ET.fromstring(jar.read("core-default.xml"))
    return sorted(n for p in root.iter("property") if (n := p.findtext("name") or "").startswith("fs.s3a."))


def test_every_key_hadoop_defines_a_default_for_is_in_the_table():
    keys = core_default_s3a_keys()
    assert len(keys) > 50
    assert [k for k in keys if lookup(k) is None] == []


def test_every_key_s3commit_reads_is_honoured():
    for name in KEYS:
        if name.startswith("fs.s3a."):
            assert S3A_KEYS[name].treatment is Treatment.HONOURED, name


def test_docs_show_the_table():
    assert markdown_table() in DOCS.read_text(), (
        "docs/spark.md's table of S3A's keys differs from s3commit.config.s3a_keys: paste the output of "
        "`python -c 'from s3commit.config.s3a_keys import markdown_table; print(markdown_table())'`")


def test_one_warning_names_each_unsupported_unknown_or_differing_setting_and_nothing_else():
    conf = {"fs.s3a.threads.max": "200", "fs.s3a.bucket.logs.select.enabled": "true", "fs.s3a.acces.key": "x",
            "fs.s3a.list.version": "1", "fs.s3a.committer.magic.enabled": "true", "fs.s3a.multipart.size": "32M",
            "fs.s3a.bucket.logs.connection.maximum": "9", "fs.s3a.s3guard.ddb.table": "t", "spark.app.name": "x",
            "fs.s3a.aws.credentials.provider": "x"}
    found = unsupported(conf)
    assert [f.split(" ")[0] for f in found] == ["fs.s3a.acces.key", "fs.s3a.bucket.logs.select.enabled",
                                                "fs.s3a.list.version=1", "fs.s3a.threads.max"]
    assert "a typo?" in found[0] and "fs.s3a.connection.maximum" in found[3]
    message = warning(conf)
    assert message is not None and message.count("fs.s3a.") >= 4
    assert warning({"fs.s3a.multipart.size": "32M", "fs.s3a.committer.require.uuid": "true"}) is None


def test_no_secret_value_is_ever_part_of_a_warning():
    for key in S3A_KEYS.values():
        if key.treatment is Treatment.SAME and key.same_as is not None:
            assert not re.search(r"key|secret|token|password", key.name), key.name
