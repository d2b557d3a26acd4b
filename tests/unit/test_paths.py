"""Layouts and magic-path mapping."""

import pytest

from s3commit.errors import ConfigError
from s3commit.model.paths import (
    SCRATCH_PREFIXES,
    JobLayout,
    TaskAttemptId,
    absolute_relative,
    add_uuid,
    check_job_id,
    final_destination,
    is_magic_file_key,
    is_magic_path,
    is_scratch_key,
    job_id_of_magic_key,
    magic_key_to_final,
    partition_of,
    relative_key,
    split_elements,
    task_attempt_id_of_magic_key,
)

U = "0b5c2f7e-1a2b-4c3d-9e8f-001122334455"
TA = "attempt_202503051719261234_0000_m_000003_0"


@pytest.mark.parametrize(("path", "elements"), [
    ("", []), ("/", []), ("//", []), ("a/b/c", ["a", "b", "c"]), ("a/b/", ["a", "b"]), ("/a//b", ["a", "b"]),
])
def test_split_elements_drops_empty_elements(path, elements):
    assert split_elements(path) == elements


@pytest.mark.parametrize(("elements", "final"), [
    (["first", "__magic_job-", "2"], ["first", "2"]),
    (["first", "__magic_job-", "2", "3.txt"], ["first", "3.txt"]),
    (["__magic_job-", "4", "__base", "2", "3.txt"], ["2", "3.txt"]),
    (["a", "__magic_job-u", "job-u", "00", "tasks", TA, "__base", "x=1", "f.txt"], ["a", "x=1", "f.txt"]),
    (["__base", "home", "__magic_job-", "2", "3.txt"], ["__base", "home", "3.txt"]),  # base before magic ignored
    (["no", "magic", "here"], ["no", "magic", "here"]),
    # s3commit's absolute locations: __abs/<dir>/__base/<name> lands at <dir>/<name>, from the bucket's root.
    (["t", "__magic_job-u", "job-u", "00", "tasks", TA, "__abs", "other", "p=1", "__base", "f.txt"],
     ["other", "p=1", "f.txt"]),
])
def test_final_destination_follows_hadoop_rules(elements, final):
    assert final_destination(elements) == final


@pytest.mark.parametrize("elements", [["__magic_job-"], ["__magic_job-", "__base"],
                                      ["__magic_job-", "__abs", "__base", "f"],
                                      ["__magic_job-", "__abs", "d", "__base", "e", "f"]])
def test_final_destination_rejects_paths_with_nothing_below_magic_or_base(elements):
    with pytest.raises(ValueError):
        final_destination(elements)


def test_job_layout_matches_hadoop_3_4_magic_layout():
    layout = JobLayout("out", U)
    assert layout.job_dir == f"out/__magic_job-{U}"
    assert layout.job_attempt_dir == f"out/__magic_job-{U}/job-{U}/00"
    assert layout.task_attempt_base(TA) == f"out/__magic_job-{U}/job-{U}/00/tasks/{TA}/__base"
    pendingset = layout.pendingset_key("task_x_0000_m_000003")
    assert pendingset == f"out/__magic_job-{U}/job-{U}/00/task_x_0000_m_000003.pendingset"
    assert layout.success_key == "out/_SUCCESS"


def test_job_layout_at_bucket_root_has_no_leading_slash():
    layout = JobLayout("", U)
    assert layout.job_dir == f"__magic_job-{U}"
    assert layout.success_key == "_SUCCESS"


def test_magic_key_maps_to_final_key_and_names_its_job_and_attempt():
    key = f"{JobLayout('t/x', U).task_attempt_base(TA)}/year=2026/part-0.parquet"
    assert is_magic_path(split_elements(key))
    assert is_magic_file_key(key)
    assert magic_key_to_final(key) == "t/x/year=2026/part-0.parquet"
    assert job_id_of_magic_key(key) == U
    assert task_attempt_id_of_magic_key(key) == TA


def test_manifests_under_magic_paths_are_plain_writes():
    base = JobLayout("t", U).task_attempt_base(TA)
    assert not is_magic_file_key(f"{base}/f.parquet.pending")
    assert not is_magic_file_key(f"t/__magic_job-{U}/job-{U}/00/task_1.pendingset")
    assert not is_magic_file_key("t/plain/file")


def test_task_attempt_id_parses_and_derives_task_id():
    parsed = TaskAttemptId.parse(TA)
    assert parsed.task == 3 and parsed.attempt == 0
    assert parsed.task_id == "task_202503051719261234_0000_m_000003"
    assert str(parsed) == TA
    assert str(TaskAttemptId.of(7, 2)) == "attempt_s3commit_0000_m_000007_2"


@pytest.mark.parametrize("bad", ["", "attempt_1", "task_1_0000_m_000001", "attempt_x_0000_z_000001_0"])
def test_malformed_task_attempt_id_is_rejected_with_the_expected_form(bad):
    with pytest.raises(ConfigError, match="attempt_<jobTracker>"):
        TaskAttemptId.parse(bad)


@pytest.mark.parametrize(("path", "expected"), [
    ("/part-0000", "/part-0000-UUID"),
    ("part-0000.gz.csv", "part-0000-UUID.gz.csv"),
    ("/parent.dir/part-0000", "/parent.dir/part-0000-UUID"),
    ("a/part-UUID.csv", "a/part-UUID.csv"),       # already present: unchanged
    ("UUID/part.csv", "UUID/part-UUID.csv"),      # a parent named so is not the name: the sweep goes by name
    ("date=UUIDX/part.csv", "date=UUIDX/part-UUID.csv"),
])
def test_add_uuid_inserts_before_first_dot_of_last_element(path, expected):
    assert add_uuid(path, "UUID") == expected


@pytest.mark.parametrize(("path", "uuid"), [("dir/", "u"), ("", "u"), ("p", "")])
def test_add_uuid_rejects_directories_and_empty_input(path, uuid):
    with pytest.raises(ValueError):
        add_uuid(path, uuid)


def test_absolute_relative_encodes_the_directory_between_abs_and_base():
    relative = absolute_relative("custom/p=1/", "part-0.parquet")
    assert relative == "__abs/custom/p=1/__base/part-0.parquet"
    assert magic_key_to_final(f"t/__magic_job-u/job-u/00/tasks/{TA}/{relative}") == "custom/p=1/part-0.parquet"
    assert is_magic_file_key(f"t/__magic_job-u/job-u/00/tasks/{TA}/{relative}")


@pytest.mark.parametrize(("directory", "name"), [("a/../b", "f"), ("a/__base", "f"), ("", "f"), ("d", "x/y"),
                                                  ("d", "__abs"), ("d/__abs", "f")])
def test_absolute_relative_rejects_unsafe_parts(directory, name):
    with pytest.raises(ConfigError):
        absolute_relative(directory, name)


def test_partition_of_is_the_parent_directory():
    assert partition_of("year=2017/month=10/part-0000.avro") == "year=2017/month=10"
    assert partition_of("part-0000.avro") is None


@pytest.mark.parametrize("bad", ["", "/abs/file", "a/../b", "a/./b", "a//b", "x/\x00y", "__magic_job-1/f",
                                 "d/__base/f", "d/__abs/f", "é" * 600])
def test_relative_key_rejects_unsafe_paths(bad):
    with pytest.raises(ConfigError):
        relative_key(bad)


def test_relative_key_keeps_unicode_and_spaces():
    assert relative_key("año=2026/naïve file ☃.csv") == "año=2026/naïve file ☃.csv"


@pytest.mark.parametrize("bad", ["", "a/b", "../x", " space", "x" * 200])
def test_job_ids_must_be_safe_in_keys(bad):
    with pytest.raises(ConfigError):
        check_job_id(bad)


@pytest.mark.parametrize(("key", "job_id", "carries"), [
    ("t/part-00000-2024-06-01-c000.parquet", "2024-06-01", True),
    ("t/date=2024-06-01/part-00000-abc-c000.parquet", "2024-06-01", False),  # a partition, not the job's name
    ("t/part-00000-x2024-06-01-c000.parquet", "2024-06-01", False),  # a substring of another word
    ("t/part-0000-UUID.gz.csv", "UUID", True),
    ("t/UUID", "UUID", True),
    ("t/UUIDX.csv", "UUID", False),
])
def test_a_job_id_is_carried_only_as_a_whole_component_of_the_file_name(key, job_id, carries):
    from s3commit.model.paths import carries_job_id

    assert carries_job_id(key, job_id) is carries


@pytest.mark.parametrize(("key", "scratch"), [
    ("t/__magic_job-1/x", True), ("__staging_job-1/p.pendingset", True), ("t/__s3commit_lease", True),
    ("t/__s3commit_probe-9/a", True), ("t/__s3commit_writing", True), ("t/__base/x", False),
    ("t/a__magic_job-1", False), ("t/part-0.parquet", False), ("t/p=__HIVE_DEFAULT_PARTITION__/x", False)])
def test_scratch_keys_are_those_with_an_element_that_is_never_user_data(key, scratch):
    assert is_scratch_key(key) is scratch
    assert all(prefix.startswith("__") for prefix in SCRATCH_PREFIXES)  # (is_scratch_key searches "__" first)
