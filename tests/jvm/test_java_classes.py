"""The Java classes against a real sidecar and the test server, in a JVM (each JUnit test method is one test here):
restarts after a sidecar is killed, re-registration, a metadata request's time limit and 100,000 task messages.

The Java classes' own logic (range arithmetic, policies and buffer modes, framing and error mapping,
configuration forwarding) is unit-tested by Maven: ``mvn -q -f jvm-bridge/pom.xml test``."""

from __future__ import annotations

import pytest

from tests.jvm.conftest import java_test_classes, java_test_names, run_junit

INTEGRATION = java_test_classes(integration=True)


@pytest.fixture(scope="module")
def integration_outcomes(java_classpath, s3_server, tmp_path_factory):
    bucket = s3_server.create_bucket("java-lifecycle-tests")
    # ckpt.exists stalls once (longer than the metadata timeout): the JVM's watchdog must give up on it.
    stall = tmp_path_factory.mktemp("stall")
    outcomes = run_junit(java_classpath, INTEGRATION, tmp_path_factory.mktemp("junit-reports"), env={
        "S3COMMIT_TEST_ENDPOINT": s3_server.endpoint_url, "S3COMMIT_TEST_BUCKET": bucket,
        "S3COMMIT_BRIDGE_METADATA_TIMEOUT": "8", "S3COMMIT_SIDECAR_CRASH": f"stall:ckpt.exists@{stall}"})
    print(outcomes.get("_info", ""))
    return outcomes


@pytest.mark.integration
@pytest.mark.parametrize("name", java_test_names(INTEGRATION))
def test_java_with_a_sidecar(integration_outcomes, name):
    assert "_run" not in integration_outcomes, integration_outcomes["_run"]
    assert integration_outcomes.get(name) == "PASS", integration_outcomes.get(name, "not run")
