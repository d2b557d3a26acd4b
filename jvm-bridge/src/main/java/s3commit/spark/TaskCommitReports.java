package s3commit.spark;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import s3commit.bridge.Sidecar;

import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The driver's task commits, told to its sidecar as Spark reports each one ({@code onTaskCommit}): the sidecar
 * reads the task's pendingset then, while other tasks run, and the job commit reads none it was told of
 * ({@code job.task_committed}; {@code s3commit.commit.preload}).
 *
 * <p>Spark calls {@code onTaskCommit} on the thread that handles its scheduler's task results, so nothing is sent
 * there: each report goes from one daemon thread of this JVM, in order. A report that fails is only a head start
 * lost (the job commit reads that pendingset). Before a job commits, {@link #drain} waits for the job's reports to
 * reach the sidecar, so that its commit finds every read begun.
 */
final class TaskCommitReports {
  private static final Logger LOG = LoggerFactory.getLogger(TaskCommitReports.class);
  /** How long a job commit waits for its reports to be sent, at most (each is answered at once). */
  private static final long DRAIN_SECONDS = 10;

  private static final ExecutorService SENDER = Executors.newSingleThreadExecutor(runnable -> {
    Thread thread = new Thread(runnable, "s3commit-task-commits");
    thread.setDaemon(true);
    return thread;
  });
  /** Each job's latest report, by job id (reports are sent in order: it is the last to end). */
  private static final Map<String, Future<?>> LATEST = new ConcurrentHashMap<>();

  private TaskCommitReports() {
  }

  /** Send {@code message} (the task commit's message, as JSON) for the job of {@code jobArgs}, later, in order. */
  static void report(String jobId, Map<String, Object> jobArgs, String message) {
    Map<String, Object> args = new HashMap<>(jobArgs);
    args.put("message", message);
    LATEST.put(jobId, SENDER.submit(() -> {
      try {
        Sidecar.run("job.task_committed", args);
      } catch (IOException | RuntimeException e) {
        LOG.debug("s3commit: a task commit of job {} was not told to the sidecar ahead (its commit reads its "
            + "pendingset): {}", jobId, e.getMessage());
      }
    }));
  }

  /** Wait (up to {@link #DRAIN_SECONDS}) for the reports of {@code jobId} sent so far; forget the job. */
  static void drain(String jobId) {
    Future<?> latest = LATEST.remove(jobId);
    if (latest == null) {
      return;
    }
    try {
      latest.get(DRAIN_SECONDS, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException | TimeoutException e) {
      LOG.debug("s3commit: the task commits of job {} were not all told ahead: {}", jobId, e.getMessage());
    }
  }

  /** Forget the job's reports (its abort: nothing of it is committed). */
  static void forget(String jobId) {
    LATEST.remove(jobId);
  }
}
