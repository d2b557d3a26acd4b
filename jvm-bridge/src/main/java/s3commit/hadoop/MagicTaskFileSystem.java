package s3commit.hadoop;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Where the magic committer's task files go when {@code s3a://} is served by another FileSystem (Hadoop's S3A from
 * hadoop-aws, a vendor's): s3commit's FileSystem under a scheme of its own, {@code s3commit-magic://bucket/key},
 * registered in the job's and each task's configuration ({@link #register}).
 *
 * <p>A magic task file must be written by s3commit's FileSystem: its output stream starts the multipart upload for
 * the final key and leaves it uncompleted for the job commit, and its {@code getFileStatus} reports the length
 * Spark's write statistics read. Under a scheme another FileSystem serves, the file would be written by that one:
 * S3A would upload it as an object under {@code __magic_job-*}, or keep its own {@code .pending} record the
 * sidecar never reads. Where s3commit's FileSystem serves {@code s3a://} itself the work path stays
 * {@code s3a://}, as it always was. Everything else (reads, listings, non-committer writes) stays with the
 * FileSystem the user configured for {@code s3a://}.
 */
public class MagicTaskFileSystem extends S3FileSystem {
  private static final Logger LOG = LoggerFactory.getLogger(MagicTaskFileSystem.class);
  public static final String SCHEME = "s3commit-magic";
  /** The key that makes Hadoop's {@code Path.getFileSystem} find this class. */
  public static final String IMPL_KEY = "fs." + SCHEME + ".impl";
  private static final String PREFIX = SCHEME + "://";
  private static final Set<String> SAID = ConcurrentHashMap.newKeySet();

  @Override
  public String getScheme() {
    return SCHEME;
  }

  /** Register this file system in {@code conf} (the job's, or a task's). */
  public static void register(Configuration conf) {
    conf.set(IMPL_KEY, MagicTaskFileSystem.class.getName());
  }

  /**
   * The class serving {@code s3a://} under {@code conf}, or null when none does (a pip PySpark without hadoop-aws,
   * where s3commit's FileSystem is not configured).
   */
  public static Class<?> s3aFileSystem(Configuration conf) {
    try {
      return FileSystem.getFileSystemClass("s3a", conf);
    } catch (IOException | RuntimeException | LinkageError e) {
      return null;
    }
  }

  /** True when {@code s3a://} is served by s3commit's own FileSystem under {@code conf}. */
  public static boolean servesS3a(Configuration conf) {
    Class<?> served = s3aFileSystem(conf);
    return served != null && S3FileSystem.class.isAssignableFrom(served);
  }

  /** One line saying which FileSystem serves {@code s3a://} and where magic task files go. */
  public static String describe(Configuration conf) {
    Class<?> served = s3aFileSystem(conf);
    if (served != null && S3FileSystem.class.isAssignableFrom(served)) {
      return "s3a:// is served by s3commit's FileSystem (" + served.getName() + ")";
    }
    return "s3a:// is served by " + (served == null ? "no FileSystem" : served.getName())
        + "; s3commit's magic task files go through its own " + PREFIX + " FileSystem";
  }

  /**
   * A committer's work path as the task's writers must open it: an {@code s3a://} magic path in this file system
   * when another FileSystem (or none) serves {@code s3a://} under {@code conf}, registered in {@code conf};
   * any other location (s3commit's own {@code s3a://}, a staging committer's local directory) as it is.
   */
  public static String pathFor(String location, Configuration conf) {
    if (location == null || !location.startsWith("s3a://") || servesS3a(conf)) {
      return location;
    }
    register(conf);
    String line = describe(conf);
    if (SAID.add(line)) {
      LOG.info("s3commit: {}", line);
    }
    return PREFIX + location.substring("s3a://".length());
  }

  /** A location of this file system as the sidecar names it ({@code s3a://}); any other as it is. */
  static String sidecarLocation(String location) {
    return location.startsWith(PREFIX) ? "s3a://" + location.substring(PREFIX.length()) : location;
  }
}
