"""Build the bridge's Java tests (``jvm-bridge/src/test/java``) with ``javac`` against the bridge jar and
PySpark's jars, and run them in a JVM: no Maven, no JUnit (``s3commit.testing.JavaTests`` is the runner)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
if shutil.which("javac") is None:  # pragma: no cover - the README's machines have a JDK
    pytest.skip("the Java tests need a JDK (javac not found)", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
TEST_SOURCES = ROOT / "jvm-bridge" / "src" / "test" / "java"


def java_test_sources() -> list[Path]:
    return sorted(TEST_SOURCES.rglob("*.java"))


def java_test_classes(*, integration: bool) -> list[str]:
    """Test class names (``*Test.java``); integration ones need a sidecar and the S3 server."""
    names = []
    for path in java_test_sources():
        if path.name.endswith("Test.java"):
            text = path.read_text()
            needs_server = "S3COMMIT_TEST_ENDPOINT" in text
            if needs_server == integration:
                names.append(".".join(path.relative_to(TEST_SOURCES).with_suffix("").parts))
    return names


@pytest.fixture(scope="session")
def java_classpath(tmp_path_factory) -> str:
    import pyspark

    from s3commit.spark import jar_path

    jar = jar_path()
    jars = Path(pyspark.__file__).resolve().parent / "jars"
    digest = hashlib.sha256(jar.encode())
    for source in java_test_sources():
        digest.update(source.read_bytes())
    # One compilation for the whole run: xdist's workers share the run's base directory (javac takes a core for
    # 10-15 s; three workers compiling the same sources at once cost the tier half a minute).
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    out = shared / f"java-tests-{digest.hexdigest()[:12]}"
    classpath = os.pathsep.join([str(out), jar, str(jars / "*")])
    with open(shared / f"{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first worker compiles; the others wait, then find the classes
        if not out.is_dir():
            building = shared / f"{out.name}.building-{os.getpid()}"
            result = subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "--release", "17", "-d",
                                     str(building), "-cp", classpath, *map(str, java_test_sources())],
                                    capture_output=True, text=True, check=False)
            if result.returncode != 0:
                shutil.rmtree(building, ignore_errors=True)
                pytest.fail(f"javac failed on the Java tests:\n{result.stderr[-4000:]}")
            building.rename(out)
    return classpath


def run_java_tests(classpath: str, classes: list[str], env: dict[str, str] | None = None) -> dict[str, str]:
    """Run test classes in one JVM; returns ``{"Class.method": "PASS" | "FAIL: reason"}`` and INFO lines."""
    environment = {**os.environ, "S3COMMIT_PYTHON": os.environ.get("S3COMMIT_PYTHON") or sys.executable,
                   **(env or {})}
    # C1 alone and one GC thread: a short test JVM spends less CPU compiling and collecting (the cores are shared).
    result = subprocess.run(["java", "-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", classpath,
                             "s3commit.testing.JavaTests", *classes],
                            capture_output=True, text=True, timeout=600, env=environment, check=False)
    outcomes: dict[str, str] = {}
    for line in result.stdout.splitlines():
        if line.startswith("PASS "):
            outcomes[line[5:].strip()] = "PASS"
        elif line.startswith("FAIL "):
            name, _, reason = line[5:].partition(": ")
            outcomes[name.strip()] = "FAIL: " + reason
        elif line.startswith("INFO "):
            outcomes.setdefault("_info", "")
            outcomes["_info"] += line[5:] + "\n"
    if not any(k for k in outcomes if not k.startswith("_")):
        outcomes["_run"] = f"FAIL: the Java test run printed no results (exit {result.returncode}):\n" + \
            result.stdout[-2000:] + result.stderr[-4000:]
    return outcomes


def java_test_names(classes: list[str]) -> list[str]:
    """``Class.method`` for every ``public static void test*()`` in the given classes' sources."""
    import re

    names = []
    for name in classes:
        source = (TEST_SOURCES / Path(*name.split("."))).with_suffix(".java").read_text()
        simple = name.rsplit(".", 1)[-1]
        names += [f"{simple}.{m}" for m in re.findall(r"public static void (test\w+)\(", source)]
    return sorted(names)
