package s3commit.spark;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.OutputCommitter;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.spark.mapred.SparkHadoopMapRedUtil;

import s3commit.bridge.Sidecar;
import s3commit.hadoop.S3FileSystem;

import java.io.IOException;
import java.util.Map;
import java.util.function.Consumer;

/**
 * A task commit of the Spark commit protocols ({@link S3CommitProtocolBase}, {@link StreamingSinkJob}): Spark's
 * {@code OutputCommitCoordinator} authorizes one attempt per task (a denied attempt is aborted and
 * {@code CommitDeniedException} raised), then the sidecar commits it and answers the task's commit message.
 */
final class CoordinatedTaskCommit {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** The sidecar request for a task's configuration (its registered configuration, destination, job...). */
  interface Request {
    Map<String, Object> of(Configuration conf) throws IOException;
  }

  private CoordinatedTaskCommit() {
  }

  /**
   * Commit the attempt of {@code context} by sending {@code op} to the sidecar, once Spark allows it; returns
   * the sidecar's commit message as JSON. {@code abort} undoes a denied attempt; the FileSystem forgets the
   * attempt's magic files under {@code workPath} whatever happens.
   */
  static String commit(TaskAttemptContext context, String op, Request request, Consumer<TaskAttemptContext> abort,
      String workPath) {
    String[] message = new String[1];
    OutputCommitter committer = new OutputCommitter() {
      @Override
      public void setupJob(JobContext jobContext) {
      }

      @Override
      public void setupTask(TaskAttemptContext taskContext) {
      }

      @Override
      public boolean needsTaskCommit(TaskAttemptContext taskContext) {
        return true;
      }

      @Override
      public void commitTask(TaskAttemptContext taskContext) throws IOException {
        Map<String, Object> args = request.of(taskContext.getConfiguration());
        args.put("task_attempt_id", taskContext.getTaskAttemptID().toString());
        try {
          message[0] = JSON.writeValueAsString(Sidecar.run(op, args).get("message"));
        } finally {
          forgetMagicLengths(workPath);
        }
      }

      @Override
      public void abortTask(TaskAttemptContext taskContext) {
        abort.accept(taskContext);
      }
    };
    // An IOException from the sidecar propagates as it is: Scala does not declare it.
    SparkHadoopMapRedUtil.commitTask(committer, context, context.getJobID().getId(),
        context.getTaskAttemptID().getTaskID().getId());
    return message[0];
  }

  /** A task's magic files are committed or aborted: the FileSystem need not remember their lengths. */
  static void forgetMagicLengths(String workPath) {
    if (workPath != null && workPath.endsWith("/__base")) {
      S3FileSystem.forgetMagic(workPath.substring(0, workPath.length() - "/__base".length()));
    }
  }
}
