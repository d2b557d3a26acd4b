"""The overwrite plan: which prefixes a job commit clears once its new files are complete. Pure."""

from __future__ import annotations

import pytest

from s3commit import ConfigError
from s3commit.commit.engine import OverwritePlan
from s3commit.model.uri import S3Uri

DEST = S3Uri("bkt", "tables/t")


@pytest.mark.parametrize("paths, relative, outside", [
    (["", "a=1"], ("", "a=1"), ()),
    (["/a=1/b=2/"], ("a=1/b=2",), ()),
    (["s3a://bkt/tables/t"], ("",), ()),
    (["s3://bkt/tables/t/a=1/"], ("a=1",), ()),
    (["s3a://bkt/custom/p=1"], (), ("custom/p=1",)),
    # A sibling whose name starts like the destination is outside it.
    (["s3a://bkt/tables/t2/p=1"], (), ("tables/t2/p=1",)),
])
def test_paths_are_sorted_into_relative_and_outside(paths, relative, outside):
    plan = OverwritePlan.of(DEST, paths, replace_partitions=True)
    assert (plan.delete_paths, plan.delete_outside, plan.replace_partitions) == (relative, outside, True)


def test_a_location_in_another_bucket_is_refused_by_name():
    with pytest.raises(ConfigError, match=r"s3a://other/x with the job: it is not in the bucket of the "
                                          r"destination s3://bkt/tables/t"):
        OverwritePlan.of(DEST, ["a=1", "s3a://other/x"])


def test_prefixes_cover_relative_and_outside_paths_without_nesting():
    plan = OverwritePlan(delete_paths=("a=1", "a=1/b=2", "a=10"), delete_outside=("custom/p=1", "custom/p=1/x"))
    assert plan.prefixes(DEST, []) == ["custom/p=1/", "tables/t/a=1/", "tables/t/a=10/"]


def test_deleting_the_whole_destination_keeps_outside_prefixes():
    plan = OverwritePlan(delete_paths=("", "a=1"), delete_outside=("custom/p=1",))
    assert plan.prefixes(DEST, []) == ["custom/p=1/", "tables/t/"]


def test_replacing_partitions_covers_the_directories_written_inside_and_outside():
    keys = ["tables/t/a=1/b=2/part-0", "tables/t/a=1/b=3/part-1", "tables/t/part-2", "custom/p=1/part-3"]
    plan = OverwritePlan(replace_partitions=True)
    assert plan.prefixes(DEST, keys) == ["custom/p=1/", "tables/t/a=1/b=2/", "tables/t/a=1/b=3/"]


def test_an_outside_location_holding_the_destination_covers_it():
    plan = OverwritePlan(delete_paths=("a=1",), delete_outside=("tables",))
    assert plan.prefixes(DEST, []) == ["tables/"]
    assert OverwritePlan(delete_outside=("",)).prefixes(DEST, []) == [""]


def test_a_plan_deletes_only_when_it_names_something():
    assert not OverwritePlan().deletes
    assert OverwritePlan(delete_outside=("custom/p=1",)).deletes
    assert OverwritePlan(delete_paths=("",)).deletes and OverwritePlan(replace_partitions=True).deletes
