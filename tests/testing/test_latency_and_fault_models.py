"""The pure models behind the simulator: latency profiles, throttle, fault decisions, stats arithmetic."""

from __future__ import annotations

import pytest

from s3commit.testing._sim.classify import S3Operation
from s3commit.testing._sim.faults import Fault, FaultInjector, FaultKind, FaultSpec
from s3commit.testing._sim.profiles import (
    PROFILES,
    S3_EXPRESS,
    S3_STANDARD,
    LatencyProfile,
    ProfileName,
    Throttle,
    ThrottleSpec,
    TokenBucket,
    deeper_prefix,
    get_profile,
    partition_prefix,
)
from s3commit.testing._sim.simulator import SimulatorConfig
from s3commit.testing._sim.stats import StatsRecorder, StatsSnapshot

PUT = S3Operation.PUT_OBJECT


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# -- latency profiles ---------------------------------------------------------------------------------


def test_s3_standard_latencies_are_tens_of_milliseconds_and_express_single_digit() -> None:
    for operation in S3Operation:
        assert 0.010 <= S3_STANDARD.first_byte(operation) < 0.100, operation
        assert 0.001 <= S3_EXPRESS.first_byte(operation) < 0.010, operation
    assert PROFILES[ProfileName.NONE].first_byte(PUT) == 0.0


def test_copy_and_transfer_time_follow_the_profile_rates() -> None:
    # 66 MB copied at 66 MB/s takes one second; 80 MB moved at 80 MB/s takes one second.
    assert S3_STANDARD.copy_seconds(66_000_000) == pytest.approx(1.0)
    assert S3_STANDARD.transfer_seconds(80_000_000) == pytest.approx(1.0)
    assert S3_STANDARD.copy_seconds(10_000_000, bandwidth=10_000_000) == pytest.approx(1.0)
    assert get_profile("none").copy_seconds(10**9) == 0.0


def test_unknown_profile_name_lists_the_valid_values() -> None:
    with pytest.raises(ValueError, match="valid values are none, s3-standard, s3-express"):
        get_profile("s3-glacier")


def test_custom_profile_round_trips_through_json_data() -> None:
    profile = LatencyProfile(
        name="slow-lists", first_byte_seconds={"ListObjectsV2": 0.5}, default_first_byte_seconds=0.01,
        transfer_bytes_per_second=1e6,
    )  # fmt: skip
    again = LatencyProfile.from_dict(profile.to_dict())
    assert again.first_byte(S3Operation.LIST_OBJECTS_V2) == 0.5
    assert again.first_byte(PUT) == 0.01
    assert again.transfer_bytes_per_second == 1e6


def test_profile_rejects_negative_latency_and_zero_rates() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        LatencyProfile(name="bad", default_first_byte_seconds=-1)
    with pytest.raises(ValueError, match="copy_bytes_per_second must be > 0"):
        LatencyProfile(name="bad", copy_bytes_per_second=0)


# -- throttle -----------------------------------------------------------------------------------------


def test_token_bucket_allows_a_burst_then_the_sustained_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=10, capacity=3, clock=clock)
    assert [bucket.try_take() for _ in range(4)] == [True, True, True, False]
    clock.now += 0.25  # 2.5 tokens refill in 0.25 s at 10/s
    assert [bucket.try_take() for _ in range(3)] == [True, True, False]
    clock.now += 60  # a long pause refills only up to the capacity
    assert [bucket.try_take() for _ in range(4)] == [True, True, True, False]


def test_throttle_limits_writes_per_first_path_element_and_leaves_reads_alone() -> None:
    clock = FakeClock()
    throttle = Throttle(ThrottleSpec(writes_per_second=2, burst_seconds=1), clock=clock)
    assert [throttle.admit(PUT, "b", f"hot/{i}") for i in range(3)] == [True, True, False]
    assert throttle.admit(PUT, "b", "cold/0")  # another prefix has its own budget
    assert throttle.admit(PUT, "other-bucket", "hot/0")  # and so has another bucket
    assert all(throttle.admit(S3Operation.GET_OBJECT, "b", "hot/0") for _ in range(10))
    assert partition_prefix("year=2026/part-0") == "year=2026"
    assert partition_prefix("_SUCCESS") == ""


def test_a_partition_splits_after_sustained_throttling_not_after_a_burst() -> None:
    clock = FakeClock()
    throttle = Throttle(ThrottleSpec(writes_per_second=10, burst_seconds=1, split_after_seconds=60), clock=clock)
    put = S3Operation.PUT_OBJECT

    def second_of_load(keys: list[str]) -> int:
        refused = sum(not throttle.admit(put, "b", key) for key in keys)
        clock.now += 0.5
        return refused

    hot = [f"t/{d}/part-{n}" for n in range(10) for d in ("x", "y")]
    assert all(second_of_load(hot) > 0 for _ in range(20))  # 10 s of throttling: a burst, no split
    assert throttle.splits("b") == []
    clock.now += 5  # a pause ends the run
    assert all(second_of_load(hot) > 0 for _ in range(121))  # 60 s of throttling: the partition splits
    assert throttle.splits("b") == ["t"]
    assert throttle.partition("b", "t/x/part-1") == "t/x" and throttle.partition("b", "t/y/part-1") == "t/y"
    clock.now += 5
    assert second_of_load(hot[:20]) == 0  # each half has the whole rate
    assert throttle.partition("b", "other/k") == "other"
    assert deeper_prefix("t/xyz", "t") == "t/x" and deeper_prefix("t", "t") is None


# -- faults -------------------------------------------------------------------------------------------


def test_fault_spec_validates_rates_and_names() -> None:
    with pytest.raises(ValueError, match="valid values are 503, 500, reset, 200-error"):
        FaultSpec(rates={"404": 0.1})
    with pytest.raises(ValueError, match="add up to more than 1"):
        FaultSpec(rates={"503": 0.7, "500": 0.7})
    with pytest.raises(ValueError, match="within"):
        FaultSpec(rates={"503": 1.5})
    with pytest.raises(ValueError, match="cannot apply to PutObject"):
        FaultSpec(operation_rates={"PutObject": {"200-error": 0.1}})


def test_200_error_rate_applies_only_to_complete_and_copy() -> None:
    spec = FaultSpec(rates={"200-error": 1.0})
    assert spec.rates_for(S3Operation.COMPLETE_MULTIPART_UPLOAD) == {FaultKind.ERROR_200: 1.0}
    assert spec.rates_for(PUT) == {}
    injector = FaultInjector(spec, seed=1)
    assert injector.decide(PUT) is None
    assert injector.decide(S3Operation.COPY_OBJECT) == Fault(FaultKind.ERROR_200)


def test_operation_rates_replace_the_global_rates_for_that_operation() -> None:
    spec = FaultSpec(rates={"503": 1.0}, operation_rates={"UploadPart": {"500": 1.0}})
    injector = FaultInjector(spec)
    assert injector.decide(S3Operation.UPLOAD_PART) == Fault(FaultKind.INTERNAL_ERROR)
    assert injector.decide(PUT) == Fault(FaultKind.SLOW_DOWN)
    assert FaultSpec.from_dict(spec.to_dict()) == spec


def _pattern(injector: FaultInjector, operation: S3Operation, n: int = 200) -> list[Fault | None]:
    return [injector.decide(operation) for _ in range(n)]


def test_same_seed_gives_the_same_faults_whatever_other_operations_do() -> None:
    spec = FaultSpec(rates={"503": 0.2, "reset": 0.1})
    first, second = FaultInjector(spec, seed=42), FaultInjector(spec, seed=42)
    expected = _pattern(first, PUT)
    # Interleave another operation's requests: PutObject's stream must not notice.
    observed = []
    for _ in range(200):
        second.decide(S3Operation.UPLOAD_PART)
        observed.append(second.decide(PUT))
    assert observed == expected
    assert 10 < sum(f is not None for f in expected) < 110  # about 30% of 200
    assert _pattern(FaultInjector(spec, seed=43), PUT) != expected


def test_reset_timing_follows_reset_after_forward() -> None:
    always_after = FaultInjector(FaultSpec(rates={"reset": 1.0}, reset_after_forward=1.0))
    never_after = FaultInjector(FaultSpec(rates={"reset": 1.0}, reset_after_forward=0.0))
    assert {f.after_forward for f in _pattern(always_after, PUT, 20) if f} == {True}
    assert {f.after_forward for f in _pattern(never_after, PUT, 20) if f} == {False}


def test_scripted_faults_come_first_then_random_ones_resume() -> None:
    injector = FaultInjector(FaultSpec(), seed=0)
    injector.script("CompleteMultipartUpload", "reset", 2, after_forward=True)
    assert injector.pending_script() == {"CompleteMultipartUpload": 2}
    complete = S3Operation.COMPLETE_MULTIPART_UPLOAD
    assert _pattern(injector, complete, 3) == [Fault(FaultKind.RESET, True)] * 2 + [None]
    with pytest.raises(ValueError, match="after_forward applies only"):
        injector.script(PUT, "503", after_forward=True)
    with pytest.raises(ValueError, match="count must be >= 1"):
        injector.script(PUT, "503", 0)


# -- configuration and stats --------------------------------------------------------------------------


def test_simulator_config_applies_partial_json_changes() -> None:
    config = SimulatorConfig().updated({"profile": "s3-express", "seed": 9, "throttle": {"writes_per_second": 10}})
    assert config.profile is S3_EXPRESS
    assert config.seed == 9
    assert config.throttle == ThrottleSpec(writes_per_second=10)
    assert config.updated({"throttle": None}).throttle is None
    with pytest.raises(ValueError, match="valid keys are profile, faults, seed, copy_bandwidth, throttle"):
        config.updated({"latency": 1})


def test_stats_snapshot_difference_keeps_only_what_changed() -> None:
    recorder = StatsRecorder()
    recorder.request(PUT)
    before = recorder.snapshot()
    recorder.request(PUT)
    recorder.request(S3Operation.UPLOAD_PART)
    recorder.fault(PUT, FaultKind.RESET, after_forward=True)
    recorder.delay(PUT, 0.25)
    recorder.copy(1000, 0.5)
    delta = recorder.snapshot().minus(before)
    assert delta.requests == {"PutObject": 1, "UploadPart": 1}
    assert delta.faults == {"PutObject": {"reset": 1}}
    assert delta.resets_after_forward == {"PutObject": 1}
    assert delta.faults_of("reset") == 1
    assert delta.delay_seconds == {"PutObject": 0.25}
    assert (delta.copy_bytes, delta.copy_seconds) == (1000, 0.5)
    assert StatsSnapshot.from_dict(delta.to_dict()) == delta
