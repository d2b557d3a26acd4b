"""The Java classes' own logic, tested in a JVM (each Java test method is one test here): range arithmetic,
policies and buffer modes, framing and error mapping, configuration forwarding; and, against a real sidecar
and the test server, restarts after a sidecar is killed, re-registration and 100,000 task messages."""

from __future__ import annotations

import pytest

from tests.jvm.conftest import java_test_classes, java_test_names, run_java_tests

UNIT = java_test_classes(integration=False)
INTEGRATION = java_test_classes(integration=True)


@pytest.fixture(scope="module")
def unit_outcomes(java_classpath):
    return run_java_tests(java_classpath, UNIT)


@pytest.fixture(scope="module")
def integration_outcomes(java_classpath, s3_server, tmp_path_factory):
    bucket = s3_server.create_bucket("java-lifecycle-tests")
    # ckpt.exists stalls once (longer than the metadata timeout): the JVM's watchdog must give up on it.
    stall = tmp_path_factory.mktemp("stall")
    outcomes = run_java_tests(java_classpath, INTEGRATION, env={
        "S3COMMIT_TEST_ENDPOINT": s3_server.endpoint_url, "S3COMMIT_TEST_BUCKET": bucket,
        "S3COMMIT_BRIDGE_METADATA_TIMEOUT": "8", "S3COMMIT_SIDECAR_CRASH": f"stall:ckpt.exists@{stall}"})
    print(outcomes.get("_info", ""))
    return outcomes


@pytest.mark.parametrize("name", java_test_names(UNIT))
def test_java_unit(unit_outcomes, name):
    assert "_run" not in unit_outcomes, unit_outcomes["_run"]
    assert unit_outcomes.get(name) == "PASS", unit_outcomes.get(name, "not run")


@pytest.mark.integration
@pytest.mark.parametrize("name", java_test_names(INTEGRATION))
def test_java_with_a_sidecar(integration_outcomes, name):
    assert "_run" not in integration_outcomes, integration_outcomes["_run"]
    assert integration_outcomes.get(name) == "PASS", integration_outcomes.get(name, "not run")
