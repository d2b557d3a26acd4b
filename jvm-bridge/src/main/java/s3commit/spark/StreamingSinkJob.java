package s3commit.spark;

import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.spark.internal.io.FileCommitProtocol.TaskCommitMessage;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import s3commit.bridge.Ndjson;
import s3commit.bridge.S3Paths;
import s3commit.bridge.Sidecar;
import s3commit.hadoop.StoreConf;

import java.io.IOException;
import java.io.Serializable;
import java.net.URI;
import java.util.ArrayList;
import java.util.ConcurrentModificationException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.UUID;

/**
 * One batch of a file sink, committed so that its data files stay pending uploads until the batch is in the
 * sink's log: the body of {@code s3commit.spark.S3StreamingCommitProtocol}, common to every Spark version
 * (that class adapts it to the version's {@code ManifestFileCommitProtocol} and sink log).
 *
 * <p>Each batch is a magic job with the id {@code b<batch>-<uuid>}: its tasks write to magic paths (uploads
 * for the final keys, never completed by a task) and commit through Spark's commit coordinator. The job
 * commit, on the driver:
 * <ol>
 *   <li>{@code stream.prepare}: the sidecar validates the tasks' pendingsets and journals them; it returns
 *   the batch's files;</li>
 *   <li>the batch's entry goes into the sink's log ({@link BatchLog#add}, written with
 *   {@code If-None-Match: *} by s3commit's checkpoint manager): the commit point. If another run of the
 *   query has committed this batch, the write fails: the batch is rolled back ({@code stream.abort}) and a
 *   {@link ConcurrentModificationException} raised. If the write fails for another reason, nobody knows
 *   whether it landed: the journal is kept, and the next recovery settles the batch as the log says;</li>
 *   <li>{@code stream.finish}: every upload is completed, the job directory deleted.</li>
 * </ol>
 * A batch that fails before its commit point is rolled back ({@link #abortJob}); one killed leaves its job
 * directory, which {@link #recover} settles (the sidecar's {@code stream.recover}): once the log has the
 * batch, the job is finished if the log names its files and rolled back otherwise. Recovery runs when a
 * sink's log is opened through s3commit's checkpoint manager (the query's start, every read of the sink),
 * before the first batch this JVM writes to a sink, and after a batch commits if an earlier run left a job
 * of that batch or an earlier one.
 */
public final class StreamingSinkJob implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final Logger LOG = LoggerFactory.getLogger(StreamingSinkJob.class);
  private static final ObjectMapper JSON = new ObjectMapper();
  /** Per sink: the batches of jobs an earlier recovery left undecided (absent: not recovered in this JVM). */
  private static final Map<String, TreeSet<Long>> UNDECIDED = new HashMap<>();

  private enum Stage { NEW, PREPARED, LOGGING, COMMITTED, ROLLED_BACK }

  private final String path;
  private final String scheme;
  private final String bucket;
  private final String dest;
  private final URI uri;
  private long batchId = -1;
  private String jobId;
  private transient String workPath;
  private transient Stage stage = Stage.NEW;

  /** A file of the batch, for its log entry. */
  public static final class CommittedFile {
    public final String path;
    public final long length;

    CommittedFile(String path, long length) {
      this.path = path;
      this.length = length;
    }
  }

  /** Writes the batch's entry into the sink's log: true if written, false if the batch is there already. */
  public interface BatchLog {
    boolean add(List<CommittedFile> files) throws Exception;
  }

  /**
   * @param sparkJobId the id Spark gives the write: the file sink passes the batch id
   * @param path the sink's directory
   */
  public StreamingSinkJob(String sparkJobId, String path) {
    if (path == null) {
      throw new IllegalArgumentException("Null destination specified");
    }
    this.uri = new Path(path).toUri();
    this.scheme = uri.getScheme();
    if (!"s3a".equals(scheme) && !"s3".equals(scheme)) {
      throw new IllegalArgumentException(
          "S3StreamingCommitProtocol writes to s3a:// or s3:// sinks, not " + path);
    }
    this.path = path;
    this.bucket = uri.getAuthority();
    this.dest = S3Paths.destination(uri);
    try {
      setBatch(Long.parseLong(sparkJobId));
    } catch (NumberFormatException e) {
      // not the file sink's batch id: setBatch() names the job
    }
  }

  /** Whether {@code path} (a sink's directory) is on S3 ({@code s3a://}, {@code s3://}): the sinks this class commits. */
  public static boolean isS3(String path) {
    String scheme = path == null ? null : new Path(path).toUri().getScheme();
    return "s3a".equals(scheme) || "s3".equals(scheme);
  }

  /** The batch this job commits (Spark's {@code setupManifestOptions}); names the job on first call. */
  public void setBatch(long batch) {
    if (jobId == null || batch != batchId) {
      batchId = batch;
      jobId = "b" + batch + "-" + UUID.randomUUID();
    }
  }

  public String jobId() {
    return jobId;
  }

  public long batchId() {
    return batchId;
  }

  private Map<String, Object> args(Configuration conf) throws IOException {
    if (jobId == null) {
      throw new IllegalStateException("the sink's batch is not known: setupManifestOptions was not called");
    }
    Map<String, Object> args = new HashMap<>();
    args.put("conf_id", StoreConf.register(conf, uri));
    args.put("dest", dest);
    args.put("job_id", jobId);
    return args;
  }

  // --- recovery -------------------------------------------------------------------------------------

  /**
   * Settle the batch jobs left under the sink {@code sinkPath} (see the class comment); returns the batches
   * still undecided. Never fails: what it cannot settle now is settled by a later call.
   */
  public static TreeSet<Long> recover(Configuration conf, Path sinkPath, String exclude) {
    URI uri = sinkPath.toUri();
    String sink = S3Paths.destination(uri);
    TreeSet<Long> undecided = new TreeSet<>();
    try {
      Map<String, Object> args = new HashMap<>();
      args.put("conf_id", StoreConf.register(conf, uri));
      args.put("dest", sink);
      if (exclude != null) {
        args.put("exclude", List.of(exclude));
      }
      Map<String, Object> report = Sidecar.run("stream.recover", args).header;
      Object left = report.get("undecided");
      if (left instanceof Map) {
        for (Object batch : ((Map<?, ?>) left).values()) {
          undecided.add(((Number) batch).longValue());
        }
      }
      Object failed = report.get("failed");
      if (failed instanceof Map && !((Map<?, ?>) failed).isEmpty()) {
        LOG.warn("s3commit: batch jobs under {} could not be settled yet: {}", sinkPath, failed);
      }
      if (report.get("finished") instanceof List && !((List<?>) report.get("finished")).isEmpty()) {
        LOG.info("s3commit: finished the committed batches of {} a stopped run had not completed: {}", sinkPath,
            report.get("finished"));
      }
    } catch (IOException | RuntimeException e) {
      LOG.warn("s3commit: could not settle the batch jobs left under {}: {}", sinkPath, e.toString());
      undecided.add(-1L);  // unknown: try again before the next batch
    }
    synchronized (UNDECIDED) {
      UNDECIDED.put(sink, undecided);
    }
    return undecided;
  }

  private TreeSet<Long> undecided() {
    synchronized (UNDECIDED) {
      return UNDECIDED.get(dest);
    }
  }

  // --- driver: job --------------------------------------------------------------------------------

  /** Before the batch: settle what earlier runs left, once per sink in this JVM (or while it is unsure). */
  public void setupJob(JobContext context) {
    stage = Stage.NEW;
    TreeSet<Long> undecided = undecided();
    if (undecided == null || undecided.contains(-1L)) {
      recover(context.getConfiguration(), new Path(path), jobId);
    }
  }

  /** The batch's commit, with {@code log} writing its entry (see the class comment for the order). */
  public void commitJob(JobContext context, scala.collection.Iterator<TaskCommitMessage> commits, BatchLog log) {
    Configuration conf = context.getConfiguration();
    List<String> messages = new ArrayList<>();
    while (commits.hasNext()) {
      Object obj = commits.next().obj();
      if (obj instanceof String) {
        messages.add((String) obj);
      }
    }
    List<CommittedFile> files;
    Map<String, Object> args;
    try {
      args = args(conf);
      files = Sidecar.run("stream.prepare", args, Ndjson.body(messages), (header, body) -> readFiles(body));
    } catch (IOException e) {
      throw new RuntimeException("s3commit: batch " + batchId + " of the sink " + path + " could not be prepared: "
          + e.getMessage(), e);
    }
    stage = Stage.PREPARED;
    boolean added;
    try {
      stage = Stage.LOGGING;
      added = log.add(files);
    } catch (Exception e) {
      if (isConflict(e)) {
        rollBack(conf);
        throw conflict(e);
      }
      // Whether the entry landed is unknown: the journal stays, and recovery settles the batch as the log says.
      throw new RuntimeException("s3commit: writing batch " + batchId + " into the log of the sink " + path
          + " failed; its files stay pending until a later run of the query (or a read of the sink) settles the "
          + "batch by what the log holds: " + e, e);
    }
    if (!added) {
      rollBack(conf);
      throw conflict(null);
    }
    stage = Stage.COMMITTED;
    try {
      Sidecar.run("stream.finish", args);
    } catch (IOException e) {
      throw new RuntimeException(e.getMessage(), e);
    }
    TreeSet<Long> undecided = undecided();
    if (undecided != null && !undecided.isEmpty() && undecided.first() <= batchId) {
      recover(conf, new Path(path), jobId);  // an earlier run's job of this batch (or before) is decided now
    }
  }

  private ConcurrentModificationException conflict(Exception cause) {
    ConcurrentModificationException e = new ConcurrentModificationException("s3commit: batch " + batchId
        + " of the sink " + path + " was committed by another run of this query (its log entry exists); this "
        + "run's files for it were discarded. Two queries must not share a checkpoint.");
    if (cause != null) {
      e.initCause(cause);
    }
    return e;
  }

  private static boolean isConflict(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof ConcurrentModificationException || t instanceof FileAlreadyExistsException) {
        return true;
      }
    }
    return false;
  }

  private void rollBack(Configuration conf) {
    try {
      Sidecar.uninterruptibly(() -> Sidecar.run("stream.abort", args(conf)));
    } catch (IOException e) {
      LOG.warn("s3commit: rolling back batch job {} of {} failed (a later recovery finishes it): {}", jobId, path,
          e.getMessage());
    }
    stage = Stage.ROLLED_BACK;
  }

  private List<CommittedFile> readFiles(s3commit.bridge.FrameChannel.Body body) throws IOException {
    // As Spark records a file: its qualified path as a URI (so a reader decodes it back).
    return Ndjson.read(body, record -> new CommittedFile(
        new Path(scheme, bucket, "/" + record.get("key")).toUri().toString(),
        ((Number) record.get("length")).longValue()));
  }

  /** A failed batch: roll it back, unless its log entry may exist (then recovery decides). */
  public void abortJob(JobContext context) {
    if (stage == null || stage == Stage.NEW || stage == Stage.PREPARED) {
      rollBack(context.getConfiguration());
    } else if (stage == Stage.LOGGING) {
      LOG.warn("s3commit: batch {} of {} failed while its log entry was written; it is settled by what the log "
          + "holds when the query runs again", batchId, path);
    }
  }

  // --- executors: tasks ---------------------------------------------------------------------------

  private static String attemptId(TaskAttemptContext context) {
    return context.getTaskAttemptID().toString();
  }

  public void setupTask(TaskAttemptContext context) {
    try {
      Map<String, Object> args = args(context.getConfiguration());
      args.put("task_attempt_id", attemptId(context));
      workPath = (String) Sidecar.run("stream.task_setup", args).get("work_path");
    } catch (IOException e) {
      throw new RuntimeException("s3commit task setup failed: " + e.getMessage(), e);
    }
  }

  /** {@code part-<split>-<job id><suffix>} under the task's magic path: an upload for the final key. */
  public String newTaskTempFile(TaskAttemptContext context, scala.Option<String> dir, String prefix,
      String suffix) {
    int split = context.getTaskAttemptID().getTaskID().getId();
    return S3Paths.taskFile(workPath, dir.isDefined() ? dir.get() : null,
        S3Paths.partFileName(prefix, split, jobId, suffix));
  }

  /** Commits through Spark's commit coordinator: a denied attempt is aborted ({@code CommitDeniedException}). */
  public TaskCommitMessage commitTask(TaskAttemptContext context) {
    return new TaskCommitMessage(CoordinatedTaskCommit.commit(context, "stream.task_commit", this::args,
        this::abortTask, workPath));
  }

  public void abortTask(TaskAttemptContext context) {
    try {
      Map<String, Object> args = args(context.getConfiguration());
      args.put("task_attempt_id", attemptId(context));
      Sidecar.uninterruptibly(() -> Sidecar.run("stream.task_abort", args));
    } catch (IOException e) {
      LOG.warn("s3commit task abort of {} failed: {}", attemptId(context), e.getMessage());
    } finally {
      CoordinatedTaskCommit.forgetMagicLengths(workPath);
    }
  }
}
