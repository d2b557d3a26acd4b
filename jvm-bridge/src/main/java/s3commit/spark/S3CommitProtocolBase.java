package s3commit.spark;


import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.spark.internal.io.FileCommitProtocol;
import org.apache.spark.internal.io.FileNameSpec;
import org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import s3commit.bridge.Ndjson;
import s3commit.bridge.S3Paths;
import s3commit.bridge.Sidecar;
import s3commit.hadoop.MagicTaskFileSystem;
import s3commit.hadoop.StagingLocalFileSystem;
import s3commit.hadoop.StoreConf;

import java.io.IOException;
import java.io.Serializable;
import java.net.URI;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Spark's commit protocol for S3 through s3commit's multipart-upload committers
 * ({@code spark.sql.sources.commitProtocolClass=s3commit.spark.S3CommitProtocol}), in the shape of Spark's
 * {@code PathOutputCommitProtocol}.
 *
 * <p>The committer is chosen by {@code fs.s3a.committer.name} (magic, directory, partitioned). Task files go
 * to the committer's work path: a magic path in S3 (uploads completed only at job commit) or a local
 * directory (staging). Task commits go through Spark's OutputCommitCoordinator exactly as
 * {@code HadoopMapReduceCommitProtocol}'s do: a denied attempt is aborted and fails with
 * {@code CommitDeniedException}. {@link #deleteWithJob} anywhere in the destination's bucket is deferred
 * to job commit and applied after the new files are complete; dynamic partition overwrite replaces the
 * partitions the job wrote, also after completion, without any rename. Files for custom partition
 * locations outside the destination ({@link #newTaskTempFileAbsPath}) are uploads for their final keys
 * too, completed with the job.
 * The job UUID is Spark's job id for this write, which Spark also puts into every file name.
 *
 * <p>The protocol is session-wide ({@code spark.sql.sources.commitProtocolClass}), so it serves every destination:
 * one that is not on {@code s3a://} or {@code s3://} (a local or HDFS path, a warehouse table, abfs, viewfs...)
 * is committed by Spark's own default protocol, {@code SQLHadoopMapReduceCommitProtocol}, to which every call is
 * handed unchanged: FileOutputCommitter with its configured algorithm, static and dynamic partition overwrite,
 * custom partition locations, as in a session without s3commit. A path without a scheme is resolved against its
 * file system at the first call that has the job's configuration (the driver's {@code setupJob}).
 *
 * <p>This class holds no S3 logic: every step is a request to this JVM's Python sidecar.
 *
 * <p>The body of {@code s3commit.spark.S3CommitProtocol}, common to every Spark version. The only
 * signature that differs between Spark 3.5 (Scala 2.12) and 4.x (Scala 2.13) is
 * {@code commitJob(JobContext, Seq<TaskCommitMessage>)}: {@code scala.collection.Seq} against
 * {@code scala.collection.immutable.Seq}. The public class ({@code jvm-bridge/src/scala-lines}, one source
 * whose {@code Seq} type the build maps to the installed PySpark's Scala line, {@code s3commit.spark.jar_path()})
 * overrides it and hands the messages to {@link #commitJobWithMessages}.
 */
public abstract class S3CommitProtocolBase extends FileCommitProtocol implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final Logger LOG = LoggerFactory.getLogger(S3CommitProtocolBase.class);

  private final String jobId;
  private final String path;
  private final boolean dynamicPartitionOverwrite;
  private String dest;
  private URI uri;
  private FileCommitProtocol spark;
  private final ArrayList<String> deletePaths = new ArrayList<>();
  private transient String workPath;
  /** The job's request fields, on the driver from its setup on: its task commits are told to the sidecar. */
  private transient Map<String, Object> jobArgs;

  protected S3CommitProtocolBase(String jobId, String path, boolean dynamicPartitionOverwrite) {
    if (path == null) {
      throw new IllegalArgumentException("Null destination specified");
    }
    this.jobId = jobId;
    this.path = path;
    this.dynamicPartitionOverwrite = dynamicPartitionOverwrite;
    route(new Path(path).toUri());
  }

  /** Binds the destination: S3 (the sidecar's), another file system (Spark's protocol), or none yet (no scheme). */
  private void route(URI uri) {
    String scheme = uri.getScheme();
    if ("s3a".equals(scheme) || "s3".equals(scheme)) {
      this.uri = uri;
      this.dest = S3Paths.destination(uri);
    } else if (scheme != null) {
      this.spark = new SQLHadoopMapReduceCommitProtocol(jobId, path, dynamicPartitionOverwrite);
    }
  }

  /**
   * Spark's own protocol when the destination is not on S3, else null: every public method hands its call to it
   * unchanged. A path without a scheme is qualified with {@code conf} first.
   */
  protected final FileCommitProtocol sparkProtocol(Configuration conf) {
    if (dest == null && spark == null) {
      try {
        Path qualified = new Path(path);
        route(qualified.getFileSystem(conf).makeQualified(qualified).toUri());
      } catch (IOException e) {
        throw new RuntimeException("cannot resolve the file system of " + path + ": " + e.getMessage(), e);
      }
    }
    return spark;
  }

  private Map<String, Object> args(Configuration conf) throws IOException {
    Map<String, Object> args = new HashMap<>();
    args.put("conf_id", StoreConf.register(conf, uri));
    args.put("dest", dest);
    args.put("job_id", jobId);
    return args;
  }

  private static String attemptId(TaskAttemptContext context) {
    return context.getTaskAttemptID().toString();
  }

  @Override
  public void setupJob(JobContext context) {
    FileCommitProtocol other = sparkProtocol(context.getConfiguration());
    if (other != null) {
      other.setupJob(context);
      return;
    }
    try {
      StagingLocalFileSystem.register(context.getConfiguration());  // shipped to the tasks with the job's conf
      MagicTaskFileSystem.register(context.getConfiguration());
      LOG.info("s3commit: {}", MagicTaskFileSystem.describe(context.getConfiguration()));
      Map<String, Object> job = args(context.getConfiguration());
      Sidecar.run("job.setup", job);
      jobArgs = job;
    } catch (IOException e) {
      throw new RuntimeException("s3commit job setup for " + path + " failed: " + e.getMessage(), e);
    }
  }

  @Override
  public void setupTask(TaskAttemptContext context) {
    FileCommitProtocol other = sparkProtocol(context.getConfiguration());
    if (other != null) {
      other.setupTask(context);
      return;
    }
    try {
      Map<String, Object> args = args(context.getConfiguration());
      args.put("task_attempt_id", attemptId(context));
      // A staging committer's work path is a local directory: its files go through StagingLocalFileSystem. A magic
      // one is in S3: its files go through s3commit's FileSystem, under a scheme of its own where another serves s3a.
      StagingLocalFileSystem.register(context.getConfiguration());
      String located = (String) Sidecar.run("task.setup", args).get("work_path");
      workPath = MagicTaskFileSystem.pathFor(StagingLocalFileSystem.pathFor(located), context.getConfiguration());
    } catch (IOException e) {
      throw new RuntimeException("s3commit task setup failed: " + e.getMessage(), e);
    }
  }

  private String fileName(TaskAttemptContext context, FileNameSpec spec) {
    return S3Paths.partFileName(spec.prefix(), context.getTaskAttemptID().getTaskID().getId(), jobId,
        spec.suffix());
  }

  /** The destination as the sidecar names it: {@code s3://bucket/key}, no trailing slash. */
  String destination() {
    return dest;
  }

  @Override
  public String newTaskTempFile(TaskAttemptContext context, scala.Option<String> dir, FileNameSpec spec) {
    FileCommitProtocol other = sparkProtocol(context.getConfiguration());
    if (other != null) {
      return other.newTaskTempFile(context, dir, spec);
    }
    if (dynamicPartitionOverwrite && dir.isEmpty()) {
      throw new IllegalArgumentException(
          "The dataset to be written must be partitioned when dynamicPartitionOverwrite is true.");
    }
    return S3Paths.taskFile(workPath, dir.isDefined() ? dir.get() : null, fileName(context, spec));
  }

  @Override
  public String newTaskTempFile(TaskAttemptContext context, scala.Option<String> dir, String ext) {
    FileCommitProtocol other = sparkProtocol(context.getConfiguration());
    if (other != null) {
      return other.newTaskTempFile(context, dir, ext);
    }
    return newTaskTempFile(context, dir, new FileNameSpec("", ext));
  }

  /**
   * A file for a custom partition location outside the destination: the committer (magic) gives a path whose
   * upload targets {@code absoluteDir/<file name>} and is completed with the rest of the job, no rename.
   * The directory must be in the destination's bucket; the staging committers refuse it with a clear error.
   */
  @Override
  public String newTaskTempFileAbsPath(TaskAttemptContext context, String absoluteDir, FileNameSpec spec) {
    FileCommitProtocol other = sparkProtocol(context.getConfiguration());
    if (other != null) {
      return other.newTaskTempFileAbsPath(context, absoluteDir, spec);
    }
    try {
      Map<String, Object> args = args(context.getConfiguration());
      args.put("task_attempt_id", attemptId(context));
      args.put("absolute_dir", absoluteDir);
      args.put("name", fileName(context, spec));
      return MagicTaskFileSystem.pathFor((String) Sidecar.run("task.absolute_path", args).get("path"),
          context.getConfiguration());
    } catch (IOException e) {
      throw new RuntimeException("s3commit cannot write to the absolute location " + absoluteDir + ": "
          + e.getMessage(), e);
    }
  }

  @Override
  public String newTaskTempFileAbsPath(TaskAttemptContext context, String absoluteDir, String ext) {
    FileCommitProtocol other = sparkProtocol(context.getConfiguration());
    if (other != null) {
      return other.newTaskTempFileAbsPath(context, absoluteDir, ext);
    }
    return newTaskTempFileAbsPath(context, absoluteDir, new FileNameSpec("", ext));
  }

  @Override
  public TaskCommitMessage commitTask(TaskAttemptContext context) {
    FileCommitProtocol other = sparkProtocol(context.getConfiguration());
    if (other != null) {
      return other.commitTask(context);
    }
    return new TaskCommitMessage(CoordinatedTaskCommit.commit(context, "task.commit", this::args, this::abortTask,
        workPath));
  }

  @Override
  public void abortTask(TaskAttemptContext context) {
    FileCommitProtocol other = sparkProtocol(context.getConfiguration());
    if (other != null) {
      other.abortTask(context);
      return;
    }
    try {
      Map<String, Object> args = args(context.getConfiguration());
      args.put("task_attempt_id", attemptId(context));
      Sidecar.uninterruptibly(() -> Sidecar.run("task.abort", args));
    } catch (IOException e) {
      LOG.warn("s3commit task abort of {} failed: {}", attemptId(context), e.getMessage());
    } finally {
      CoordinatedTaskCommit.forgetMagicLengths(workPath);
    }
  }

  /** The job commit, given the committed tasks' messages (the per-Scala-version class passes its Seq's). */
  protected final void commitJobWithMessages(JobContext context, scala.collection.Iterator<TaskCommitMessage> it) {
    try {
      List<String> messages = new ArrayList<>();
      while (it.hasNext()) {
        Object obj = it.next().obj();
        if (obj instanceof String) {
          messages.add((String) obj);
        }
      }
      TaskCommitReports.drain(jobId);  // every read the sidecar was told to begin is begun before the commit
      Map<String, Object> args = args(context.getConfiguration());
      args.put("delete_paths", deletePaths);
      args.put("replace_partitions", dynamicPartitionOverwrite);
      // The messages stream as the request's body, one JSON record per line: no frame grows with the job. An
      // interrupt (a query cancelled through Thrift or Connect) does not abandon the commit: its outcome is awaited
      // (the sidecar settles the request sent again to the first one's end), so the job is either committed and
      // reported so, or rolled back and reported failed.
      Sidecar.runToItsEnd("job.commit", args, () -> Ndjson.body(messages));
    } catch (IOException e) {
      throw new RuntimeException("s3commit job commit to " + path + " failed: " + e.getMessage(), e);
    }
  }

  /**
   * On the driver, as each task commits: the sidecar is told (from a thread of its own: {@link TaskCommitReports}),
   * and reads the task's pendingset while the other tasks run, so that the job commit need not.
   */
  @Override
  public void onTaskCommit(TaskCommitMessage message) {
    if (spark != null) {
      spark.onTaskCommit(message);
      return;
    }
    Object obj = message.obj();
    if (jobArgs != null && obj instanceof String) {
      TaskCommitReports.report(jobId, jobArgs, (String) obj);
    }
  }

  @Override
  public void abortJob(JobContext context) {
    FileCommitProtocol other = sparkProtocol(context.getConfiguration());
    if (other != null) {
      other.abortJob(context);
      return;
    }
    TaskCommitReports.forget(jobId);  // (one that reaches the sidecar after the abort is ignored there)
    try {
      Map<String, Object> args = args(context.getConfiguration());
      Sidecar.uninterruptibly(() -> Sidecar.run("job.abort", args));
    } catch (IOException e) {
      LOG.warn("s3commit job abort for {} failed: {}", path, e.getMessage());
    }
  }

  /** Deletions in the destination's bucket wait for the job commit (after the new files are complete). */
  @Override
  public boolean deleteWithJob(FileSystem fs, Path target, boolean recursive) {
    FileCommitProtocol other = sparkProtocol(fs.getConf());
    if (other != null) {
      return other.deleteWithJob(fs, target, recursive);
    }
    String bucket = uri.getAuthority();
    URI where = fs.makeQualified(target).toUri();
    String key = S3Paths.key(where);
    if (bucket.equals(where.getAuthority())) {
      // Deferred, under the destination or elsewhere in its bucket (a custom partition location): the job
      // commit deletes the old objects after the new ones are complete (OverwritePlan.of sorts the location).
      deletePaths.add("s3a://" + bucket + "/" + key);
      LOG.info("s3commit: deleting old data under {} after the job's files are complete", target);
      return true;
    }
    try {
      return fs.delete(target, recursive);
    } catch (IOException e) {
      throw new RuntimeException("could not delete " + target + ": " + e.getMessage(), e);
    }
  }
}
