package s3commit.bridge;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Starting one sidecar process ({@code python -m s3commit.bridge}): which Python runs it, the secret token it
 * is given, and the line it prints when it is ready (its socket, version and block directory). What the
 * JVM then does with the sidecar (requests, restarts) is {@link Sidecar}'s.
 */
final class SidecarProcess {
  static final String TOKEN_ENV = "S3COMMIT_BRIDGE_TOKEN";
  static final String HADOOP_VERSION_ENV = "S3COMMIT_HADOOP_VERSION";

  /** The Hadoop on this JVM's classpath (Spark's), or "" where it cannot be read. */
  static String hadoopVersion() {
    try {
      return org.apache.hadoop.util.VersionInfo.getVersion();
    } catch (RuntimeException | LinkageError e) {
      return "";
    }
  }

  final Process process;
  final Path socket;
  final String token;
  final String pythonVersion;
  final String blocksDir;

  private SidecarProcess(Process process, Path socket, String token, String pythonVersion, String blocksDir) {
    this.process = process;
    this.socket = socket;
    this.token = token;
    this.pythonVersion = pythonVersion;
    this.blocksDir = blocksDir;
  }

  /**
   * The Python that runs the sidecar: S3COMMIT_PYTHON; else the system property spark.s3commit.python (a driver
   * launched by spark-submit has its --conf settings as system properties) or s3commit.python; else
   * PYSPARK_PYTHON; else python3.
   */
  static String python() {
    String[] candidates = {System.getenv("S3COMMIT_PYTHON"), System.getProperty("spark.s3commit.python"),
        System.getProperty("s3commit.python"), System.getenv("PYSPARK_PYTHON")};
    for (String value : candidates) {
      if (value != null && !value.isEmpty()) {
        return value;
      }
    }
    return "python3";
  }

  /** Start a sidecar and wait until it says it is ready (or why it cannot be). */
  @SuppressWarnings("unchecked")
  static SidecarProcess launch() throws IOException {
    String python = python();
    byte[] secret = new byte[32];
    new SecureRandom().nextBytes(secret);
    String token = HexFormat.of().formatHex(secret);
    ProcessBuilder builder = new ProcessBuilder(python, "-m", "s3commit.bridge");
    builder.environment().put(TOKEN_ENV, token);
    // The sidecar writes .pending/.pendingset part ETags in the form this JVM's own S3A reads (s3commit.model.manifests).
    builder.environment().put(HADOOP_VERSION_ENV, hadoopVersion());
    builder.redirectError(ProcessBuilder.Redirect.INHERIT);
    Process process;
    try {
      process = builder.start();
    } catch (IOException e) {
      throw new IOException("could not start the s3commit sidecar with Python '" + python + "' (set "
          + "PYSPARK_PYTHON or S3COMMIT_PYTHON to a Python that has s3commit installed): " + e.getMessage(), e);
    }
    // Our end of its stdin stays open for the life of this JVM: when the JVM goes, the sidecar sees EOF.
    BufferedReader stdout = new BufferedReader(new InputStreamReader(process.getInputStream(),
        StandardCharsets.UTF_8));
    String line = stdout.readLine();
    if (line == null) {
      int code = waitFor(process);
      throw new IOException("the s3commit sidecar (" + python + " -m s3commit.bridge) exited with code " + code
          + " before it was ready; is s3commit installed for that Python? (its error is in the log above)");
    }
    Map<String, Object> ready = FrameChannel.JSON.readValue(line, Map.class);
    if (ready.containsKey("error")) {
      throw new IOException("the s3commit sidecar refused to start: " + ready.get("error"));
    }
    return new SidecarProcess(process, Path.of((String) ready.get("socket")), token,
        String.valueOf(ready.get("version")), String.valueOf(ready.get("blocks_dir")));
  }

  /** "still running", "exit code N" or "killed by signal N". */
  static String exitDescription(Process process) {
    if (process.isAlive()) {
      return "still running";
    }
    int code = process.exitValue();
    return code > 128 ? "killed by signal " + (code - 128) : "exit code " + code;
  }

  private static int waitFor(Process process) {
    try {
      process.waitFor(10, TimeUnit.SECONDS);
      return process.isAlive() ? -1 : process.exitValue();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return -1;
    }
  }
}
