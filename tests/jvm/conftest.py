"""The bridge's Java tests (``jvm-bridge/src/test/java``, JUnit 5) that need a sidecar and the S3 test server,
and the stream oracle: compiled here with ``javac`` against the bridge jar and PySpark's jars, and run with the
JUnit Platform Console Launcher, each Java test method one pytest test.

The pure unit tests run under Maven (``mvn -q -f jvm-bridge/pom.xml test``), which leaves out the tests tagged
``integration``. The launcher is the ``junit-platform-console-standalone`` jar of the version the pom names
(``junit.platform.version``), taken from the local Maven repository and put there by Maven the first time
(``mvn dependency:get``; a few MB, once).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
POM = ROOT / "jvm-bridge" / "pom.xml"
TEST_SOURCES = ROOT / "jvm-bridge" / "src" / "test" / "java"
ORACLE = TEST_SOURCES / "s3commit" / "testing" / "StreamOracle.java"
INTEGRATION_TAG = '@Tag("integration")'
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
# C1 alone and one GC thread: a short test JVM spends less CPU compiling and collecting (the cores are shared).
JVM_OPTIONS = ["-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]


def java_test_sources() -> list[Path]:
    return sorted(TEST_SOURCES.rglob("*Test.java"))


def java_test_classes(*, integration: bool) -> list[str]:
    """Test class names (``*Test.java``); integration ones (tagged so) need a sidecar and the S3 server."""
    return [".".join(path.relative_to(TEST_SOURCES).with_suffix("").parts) for path in java_test_sources()
            if (INTEGRATION_TAG in path.read_text()) == integration]


def java_test_names(classes: list[str]) -> list[str]:
    """``Class.method`` for every ``@Test`` method in the given classes' sources."""
    names = []
    for name in classes:
        source = (TEST_SOURCES / Path(*name.split("."))).with_suffix(".java").read_text()
        simple = name.rsplit(".", 1)[-1]
        names += [f"{simple}.{m}" for m in re.findall(r"@Test\b[^;{}]*?\bvoid\s+(\w+)\s*\(", source)]
    return sorted(names)


def junit_platform_version() -> str:
    found = re.search(r"<junit\.platform\.version>([^<]+)</junit\.platform\.version>", POM.read_text())
    assert found, f"{POM} names no junit.platform.version"
    return found.group(1).strip()


def junit_console_jar() -> Path:
    """The JUnit Platform Console Launcher (standalone) jar in the local Maven repository, resolved by Maven from
    Maven Central the first time."""
    version = junit_platform_version()
    name = "junit-platform-console-standalone"
    local = Path.home() / ".m2" / "repository"
    jar = local / "org" / "junit" / "platform" / name / version / f"{name}-{version}.jar"
    if jar.is_file():
        return jar
    mvn = shutil.which("mvn")
    if mvn is None:  # pragma: no cover - CI has Maven
        pytest.skip(f"the Java tests need the JUnit console launcher ({jar}): Maven (mvn) resolves it once")
    # Run outside the project (the goal needs none), into the default local repository.
    result = subprocess.run([mvn, "-q", "-B", "-ntp", f"{DEPENDENCY_PLUGIN}:get", "-Dtransitive=false",
                             f"-Dartifact=org.junit.platform:{name}:{version}", f"-Dmaven.repo.local={local}"],
                            capture_output=True, text=True, check=False, cwd=tempfile.gettempdir(), timeout=600)
    if result.returncode != 0 or not jar.is_file():
        pytest.fail(f"Maven could not resolve {name} {version} into {local}:\n{result.stdout[-2000:]}"
                    f"{result.stderr[-2000:]}")
    return jar


@pytest.fixture(scope="session")
def java_classpath(tmp_path_factory) -> str:
    """The compiled integration tests and the stream oracle, the bridge jar and PySpark's jars."""
    pyspark = pytest.importorskip("pyspark")
    if shutil.which("javac") is None:  # pragma: no cover - the README's machines have a JDK
        pytest.skip("the Java tests need a JDK (javac not found)")

    from s3commit.spark import jar_path

    jar = jar_path()
    jars = Path(pyspark.__file__).resolve().parent / "jars"
    sources = [ORACLE] + [TEST_SOURCES / Path(*name.split(".")).with_suffix(".java")
                          for name in java_test_classes(integration=True)]
    digest = hashlib.sha256(f"{jar}|{junit_platform_version()}".encode())
    for source in sorted(TEST_SOURCES.rglob("*.java")):  # javac may take any of them through -sourcepath
        digest.update(source.read_bytes())
    # One compilation for the whole run: xdist's workers share the run's base directory (javac takes a core for
    # several seconds; workers compiling the same sources at once would cost the tier more).
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    out = shared / f"java-tests-{digest.hexdigest()[:12]}"
    classpath = os.pathsep.join([str(out), jar, str(jars / "*")])
    with open(shared / f"{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first worker compiles; the others wait, then find the classes
        console = junit_console_jar()
        if not out.is_dir():
            building = shared / f"{out.name}.building-{os.getpid()}"
            # javac's own JVM on C1 too, and no search of PySpark's 280 jars for annotation processors: half
            # the time of a plain javac here.
            javac = ["javac", *(f"-J{option}" for option in JVM_OPTIONS[1:]), "-proc:none", "-nowarn", "-encoding",
                     "UTF-8", "--release", "17", "-d", str(building), "-sourcepath", str(TEST_SOURCES),
                     "-cp", os.pathsep.join([classpath, str(console)])]
            result = subprocess.run([*javac, *map(str, sources)], capture_output=True, text=True, check=False)
            if result.returncode != 0:
                shutil.rmtree(building, ignore_errors=True)
                pytest.fail(f"javac failed on the Java tests:\n{result.stderr[-4000:]}")
            building.rename(out)
    return classpath


def run_junit(classpath: str, classes: list[str], reports: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """Run JUnit test classes in one JVM with the console launcher; returns ``{"Class.method": "PASS" |
    "FAIL: reason"}`` from its XML report, and the ``INFO`` lines the tests printed under ``_info``."""
    environment = {**os.environ, "S3COMMIT_PYTHON": os.environ.get("S3COMMIT_PYTHON") or sys.executable,
                   **(env or {})}
    command = ["java", *JVM_OPTIONS, "-cp", os.pathsep.join([str(junit_console_jar()), classpath]),
               "org.junit.platform.console.ConsoleLauncher", "execute", "--disable-banner",
               "--disable-ansi-colors", "--details=none", f"--reports-dir={reports}",
               *(f"--select-class={name}" for name in classes)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=environment, check=False)
    outcomes: dict[str, str] = {}
    info = [line[5:] for line in result.stdout.splitlines() if line.startswith("INFO ")]
    if info:
        outcomes["_info"] = "\n".join(info) + "\n"
    report = reports / "TEST-junit-jupiter.xml"
    if report.is_file():
        for case in ET.parse(report).getroot().iter("testcase"):
            name = f"{case.get('classname', '').rsplit('.', 1)[-1]}.{case.get('name', '').split('(')[0]}"
            problem = next((e for e in case if e.tag in ("failure", "error", "skipped")), None)
            if problem is None:
                outcomes[name] = "PASS"
            else:
                outcomes[name] = f"FAIL: {problem.tag}: {problem.get('message') or ''}\n{problem.text or ''}"
    if not any(k for k in outcomes if not k.startswith("_")):
        outcomes["_run"] = f"FAIL: the Java test run reported no results (exit {result.returncode}):\n" + \
            result.stdout[-2000:] + result.stderr[-4000:]
    return outcomes
