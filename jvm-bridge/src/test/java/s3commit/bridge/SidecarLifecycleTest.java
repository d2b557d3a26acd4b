package s3commit.bridge;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.condition.EnabledIfEnvironmentVariable;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

/**
 * The JVM side of a sidecar's life, against a real sidecar and the test S3 server (the pytest suite passes
 * {@code S3COMMIT_TEST_ENDPOINT} and {@code S3COMMIT_TEST_BUCKET}): a killed sidecar is replaced and the
 * configuration registered again; a request that needed the dead sidecar's state fails by name; 100,000
 * task messages cross in bounded frames.
 *
 * <p>Tagged {@code integration}: {@code mvn test} leaves it out (and skips it without the server's environment), and
 * {@code tests/jvm/test_java_classes.py} runs it with the JUnit Platform Console Launcher, the server started and
 * the environment set. Its methods run in name order, in one JVM, with one sidecar after another.
 */
@Tag("integration")
@EnabledIfEnvironmentVariable(named = "S3COMMIT_TEST_ENDPOINT", matches = ".+")
@TestMethodOrder(MethodOrderer.MethodName.class)
final class SidecarLifecycleTest {
  private static Map<String, String> conf() {
    Map<String, String> keys = new HashMap<>();
    keys.put("fs.s3a.endpoint", System.getenv("S3COMMIT_TEST_ENDPOINT"));
    keys.put("fs.s3a.path.style.access", "true");
    keys.put("fs.s3a.access.key", "testing");
    keys.put("fs.s3a.secret.key", "testing");
    keys.put("fs.s3a.endpoint.region", "us-east-1");
    keys.put("fs.s3a.multipart.size", "5M");
    return keys;
  }

  private static Map<String, Object> stat(String confId, String key) {
    Map<String, Object> args = new HashMap<>();
    args.put("conf_id", confId);
    args.put("path", "s3a://" + System.getenv("S3COMMIT_TEST_BUCKET") + "/" + key);
    return args;
  }

  private static void kill(Sidecar sidecar) throws InterruptedException {
    sidecar.process().destroyForcibly();
    sidecar.process().waitFor(10, TimeUnit.SECONDS);
  }

  @Test
  void testAKilledSidecarIsReplacedAndTheConfigurationRegisteredAgain() throws Exception {
    String confId = BridgeConf.register(conf());
    Sidecar first = Sidecar.get();
    assertThrows(FileNotFoundException.class, () -> Sidecar.run("fs.stat", stat(confId, "missing")), "before");
    kill(first);
    // The next request finds the sidecar gone, starts a new one, is told the configuration is unknown,
    // registers it again and goes through: the caller sees the answer it would have seen anyway.
    assertThrows(FileNotFoundException.class, () -> Sidecar.run("fs.stat", stat(confId, "missing")), "after");
    Sidecar second = Sidecar.get();
    assertTrue(second != first && second.isAlive(), "a new sidecar");
    assertEquals(first.generation() + 1, second.generation(), "one more generation");
    assertTrue(second.pid() != first.pid(), "another process");
  }

  @Test
  void testAWriteOnADeadSidecarFailsByNameAndAnAbortStillReturns() throws Exception {
    String confId = BridgeConf.register(conf());
    Sidecar sidecar = Sidecar.get();
    Map<String, Object> open = stat(confId, "written-" + UUID.randomUUID());
    Map<String, Object> opened = sidecar.request("fs.open_write", open, null, Sidecar::collect).header;
    Map<String, Object> handle = new HashMap<>();
    handle.put("handle", opened.get("handle"));
    handle.put("length", 5);
    kill(sidecar);
    IOException e = assertThrows(Sidecar.SidecarDiedException.class,
        () -> sidecar.exchange("fs.write_block", handle, channel -> {
          channel.writeData(java.nio.ByteBuffer.wrap("hello".getBytes(StandardCharsets.UTF_8)));
          channel.endBody();
        }, Sidecar::collect), "write on the dead sidecar");
    assertTrue(e.getMessage().contains("died during fs.write_block"), e.getMessage());
    assertTrue(e.getMessage().contains("signal 9") || e.getMessage().contains("exit code"), e.getMessage());
    // The stream's next request is not sent to the new sidecar, whose handles mean other files.
    assertThrows(Sidecar.SidecarDiedException.class,
        () -> sidecar.exchange("fs.abort_write", handle, null, Sidecar::collect), "abort on the dead one");
    assertTrue(Sidecar.get().isAlive(), "the JVM's current sidecar is a new one");
  }

  /** The integration run sets S3COMMIT_BRIDGE_METADATA_TIMEOUT and a one-shot stall of ckpt.exists. */
  @Test
  void testAMetadataRequestWithoutAnAnswerTimesOutNamingIt() throws Exception {
    String confId = BridgeConf.register(conf());
    Map<String, Object> args = stat(confId, "no-such-checkpoint");
    java.net.SocketTimeoutException e = assertThrows(java.net.SocketTimeoutException.class,
        () -> Sidecar.run("ckpt.exists", args), "a stalled metadata request");
    assertTrue(e.getMessage().contains("ckpt.exists") && e.getMessage().contains("S3COMMIT_BRIDGE_METADATA_TIMEOUT"),
        e.getMessage());
    // The stall fires once; the connection it held was dropped, and the next request is answered.
    assertEquals(Boolean.FALSE, Sidecar.run("ckpt.exists", args).header.get("exists"), "answered afterwards");
  }

  @Test
  void testNonRestartableRequestsAreNotSentAgain() throws Exception {
    Sidecar.get();  // its hello carries the operation table
    assertFalse(Sidecar.isRestartable("task.commit"), "task.commit depends on nothing, but is not idempotent");
    assertFalse(Sidecar.isRestartable("fs.write_block"), "a write handle dies with its sidecar");
    assertFalse(Sidecar.isRestartable("fs.close_write"), "a write handle dies with its sidecar");
    assertTrue(Sidecar.isRestartable("job.commit"), "the job commit resumes from its journal");
    assertTrue(Sidecar.isRestartable("fs.read"), "reads are stateless");
  }

  @Test
  void testAnOversizedHeaderIsRefusedInTheJvmWithTheLimitNamed() throws Exception {
    Map<String, Object> args = new HashMap<>();
    args.put("conf", Map.of("s3commit.huge", "x".repeat(FrameChannel.FRAME_LIMIT)));
    FrameChannel.FrameTooLargeException e = assertThrows(FrameChannel.FrameTooLargeException.class,
        () -> Sidecar.run("conf.register", args), "too large");
    assertTrue(e.getMessage().contains("conf.register") && e.getMessage().contains("frame limit"), e.getMessage());
    assertTrue(Sidecar.get().isAlive(), "nothing broke");
  }

  @Test
  void testAHundredThousandTaskMessagesCrossInBoundedFrames() throws Exception {
    String confId = BridgeConf.register(conf());
    String jobId = UUID.randomUUID().toString();
    Map<String, Object> job = new HashMap<>();
    job.put("conf_id", confId);
    job.put("dest", "s3://" + System.getenv("S3COMMIT_TEST_BUCKET") + "/wide-" + jobId);
    job.put("job_id", jobId);
    Sidecar.run("job.setup", job);
    long started = System.nanoTime();
    Map<String, Object> reply = Sidecar.run("job.commit", job, Sidecar.streamed(out -> {
      for (int task = 0; task < 100_000; task++) {
        String message = String.format("{\"job_id\":\"%s\",\"task_id\":\"task_202611230000_0001_m_%06d\","
            + "\"task_attempt_id\":\"attempt_202611230000_0001_m_%06d_0\",\"pendingset_key\":null,\"files\":0,"
            + "\"bytes\":0,\"absolute_dirs\":[]}\n", jobId, task, task);
        out.write(message.getBytes(StandardCharsets.UTF_8));
      }
    }), Sidecar::collect).header;
    assertEquals(100000, ((Number) reply.get("messages")).intValue(), "messages received");
    System.out.println("INFO 100,000 task messages committed through the JVM bridge in "
        + (System.nanoTime() - started) / 1_000_000 + " ms");
  }
}
