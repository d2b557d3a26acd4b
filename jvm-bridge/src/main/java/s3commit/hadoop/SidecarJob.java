package s3commit.hadoop;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.JobID;

import s3commit.bridge.S3Paths;
import s3commit.bridge.Sidecar;

import java.io.IOException;
import java.net.URI;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * One s3commit job as Hadoop's committer APIs see it: its destination, the job id the driver and every task
 * agree on, and the sidecar requests of the committer lifecycle ({@code job.setup}, {@code task.setup},
 * {@code task.commit}, {@code task.abort}, {@code job.commit}, {@code job.abort}). Shared by
 * {@link S3OutputCommitter} (new {@code mapreduce} API) and {@link S3MapRedCommitter} (old {@code mapred}
 * API). Holds no S3 logic.
 *
 * <p>Hadoop's {@code OutputCommitter.commitJob(JobContext)} receives no task messages, so the job commit reads
 * every task's pendingset from the job directory (the last committed attempt of each task wins), as Hadoop's
 * S3A committers do.
 */
public final class SidecarJob {
  /** S3A's key for an explicit job UUID; set it per write, never once for a whole session. */
  public static final String UUID_KEY = "fs.s3a.committer.uuid";

  /**
   * Each task attempt's work path in this JVM, from its {@code task.setup}: Hadoop's output formats ask a
   * committer instance of their own for it ({@code FileOutputFormat.getDefaultWorkFile} in the new API,
   * {@code getTaskOutputPath} in the old), not the one the engine set the task up with.
   */
  private static final Map<String, String> WORK_PATHS = new ConcurrentHashMap<>();

  private final String location;
  private final String dest;
  private final URI uri;

  public SidecarJob(Path output) {
    if (!isS3(output)) {
      throw new IllegalArgumentException("s3commit commits to s3a:// or s3:// destinations, not " + output);
    }
    this.uri = output.toUri();
    this.location = output.toString();
    this.dest = S3Paths.destination(uri);
  }

  /** True for an {@code s3a://} or {@code s3://} path (the destinations s3commit commits to). */
  public static boolean isS3(Path path) {
    String scheme = path == null ? null : path.toUri().getScheme();
    return "s3a".equals(scheme) || "s3".equals(scheme);
  }

  /**
   * The job id of a Hadoop job: {@value #UUID_KEY} if set, else the job-tracker part of its {@link JobID}.
   *
   * <p>Why not the whole JobID, or {@code spark.sql.sources.writeJobUUID}: Spark's RDD writes
   * ({@code SparkHadoopWriter}) give the driver the JobID {@code (tracker, rdd id)} and the tasks
   * {@code (tracker, stage id)}, so only the tracker part is the same on both; it is per write (a timestamp
   * and a random number). Spark sets {@code spark.sql.sources.writeJobUUID} only in the driver's job
   * configuration, which reaches the tasks for {@code saveAsTextFile}, {@code saveAsHadoopFile} and
   * {@code saveAsNewAPIHadoopFile} but not for {@code saveAsNewAPIHadoopDataset} given a plain
   * Configuration (PySpark's): the tasks would then use another id than the driver, and the job commit would
   * find none of their files.
   *
   * @throws IOException the job has no JobID: Spark SQL's own commit protocol, which cannot use this committer.
   */
  public static String jobId(Configuration conf, JobID id) throws IOException {
    if (id == null || id.getJtIdentifier() == null || id.getJtIdentifier().isEmpty()) {
      // Spark SQL's own commit protocol (FileFormatWriter) hands committers a Job without a JobID, gives its
      // tasks a JobID the driver never sees, and writes task files straight into the destination unless the
      // committer is a FileOutputCommitter: refuse before anything is written.
      throw new IOException("s3commit's Hadoop committer was given a job without a Hadoop job id: this is "
          + "Spark SQL's own commit protocol (spark.sql.sources.commitProtocolClass set to Spark's default, "
          + "writing a format other than Parquet), which cannot commit through it. Use "
          + "s3commit.spark.S3CommitProtocol (what s3commit.spark.configure() sets), or set "
          + "mapreduce.outputcommitter.factory.scheme.s3a to "
          + "org.apache.hadoop.mapreduce.lib.output.FileOutputCommitterFactory for Hadoop's FileOutputCommitter");
    }
    String explicit = conf.getTrimmed(UUID_KEY, "");
    return explicit.isEmpty() ? id.getJtIdentifier() : explicit;
  }

  public String location() {
    return location;
  }

  private Map<String, Object> args(Configuration conf, String jobId) throws IOException {
    Map<String, Object> args = new HashMap<>();
    args.put("conf_id", StoreConf.register(conf, uri));
    args.put("dest", dest);
    args.put("job_id", jobId);
    return args;
  }

  private Map<String, Object> taskArgs(Configuration conf, String jobId, String attempt) throws IOException {
    Map<String, Object> args = args(conf, jobId);
    args.put("task_attempt_id", attempt);
    return args;
  }

  private static String key(String jobId, String attempt) {
    return jobId + "/" + attempt;
  }

  /**
   * Sets the job up, claiming its destination as new ({@code exclusive}): an RDD write promises, as Hadoop's
   * {@code FileOutputFormat} does, that its output did not exist, so two jobs started together on one new
   * destination must not both pass; the claim goes with the job's commit or abort.
   */
  public void setupJob(Configuration conf, String jobId) throws IOException {
    Sidecar.run("job.setup", jobArgs(conf, jobId));
  }

  /**
   * Completes every committed task's uploads (read from the job directory), then writes {@code _SUCCESS}; its
   * outcome is awaited even if this thread is interrupted ({@link Sidecar#runToItsEnd}).
   */
  public void commitJob(Configuration conf, String jobId) throws IOException {
    Map<String, Object> args = jobArgs(conf, jobId);  // no "messages": every pendingset of the job
    Sidecar.runToItsEnd("job.commit", args, () -> null);
  }

  public void abortJob(Configuration conf, String jobId) throws IOException {
    Map<String, Object> args = jobArgs(conf, jobId);
    Sidecar.uninterruptibly(() -> Sidecar.run("job.abort", args));
  }

  private Map<String, Object> jobArgs(Configuration conf, String jobId) throws IOException {
    Map<String, Object> args = args(conf, jobId);
    args.put("exclusive", true);
    return args;
  }

  /**
   * Sets the attempt up in this JVM's sidecar; returns its work path as the output format must open it (an
   * {@code s3a://} or {@code file:} URI, or {@code s3commit-magic://} where another FileSystem serves
   * {@code s3a://}: {@link MagicTaskFileSystem#pathFor}).
   */
  public String setupTask(Configuration conf, String jobId, String attempt) throws IOException {
    String workPath = (String) Sidecar.run("task.setup", taskArgs(conf, jobId, attempt)).get("work_path");
    WORK_PATHS.put(key(jobId, attempt), workPath);
    return MagicTaskFileSystem.pathFor(workPath, conf);
  }

  /** The attempt's work path: the one its setup returned in this JVM, else a setup now. */
  public String workPath(Configuration conf, String jobId, String attempt) throws IOException {
    String workPath = WORK_PATHS.get(key(jobId, attempt));
    return workPath != null ? MagicTaskFileSystem.pathFor(workPath, conf) : setupTask(conf, jobId, attempt);
  }

  public void commitTask(Configuration conf, String jobId, String attempt) throws IOException {
    try {
      Sidecar.run("task.commit", taskArgs(conf, jobId, attempt));
    } finally {
      forget(jobId, attempt);
    }
  }

  public void abortTask(Configuration conf, String jobId, String attempt) throws IOException {
    try {
      Sidecar.uninterruptibly(() -> Sidecar.run("task.abort", taskArgs(conf, jobId, attempt)));
    } finally {
      forget(jobId, attempt);
    }
  }

  /** The attempt has ended: forget its work path, and the lengths of its magic files. */
  private static void forget(String jobId, String attempt) {
    String workPath = WORK_PATHS.remove(key(jobId, attempt));
    if (workPath != null && workPath.endsWith("/__base")) {
      S3FileSystem.forgetMagic(workPath.substring(0, workPath.length() - "/__base".length()));
    }
  }
}
