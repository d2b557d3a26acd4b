package s3commit.bridge;

import java.net.URI;

/**
 * How the JVM side spells S3 locations and task files for the sidecar: the one place that strips slashes
 * from a key, names a destination and builds Spark's part-file names.
 */
public final class S3Paths {
  private S3Paths() {
  }

  /** {@code path} without its leading slashes. */
  public static String withoutLeadingSlashes(String path) {
    int start = 0;
    while (start < path.length() && path.charAt(start) == '/') {
      start++;
    }
    return path.substring(start);
  }

  /** {@code path} without its trailing slashes. */
  public static String withoutTrailingSlashes(String path) {
    int end = path.length();
    while (end > 0 && path.charAt(end - 1) == '/') {
      end--;
    }
    return path.substring(0, end);
  }

  /** The key of an {@code s3a://} or {@code s3://} URI: its path without leading or trailing slashes. */
  public static String key(URI uri) {
    return uri.getPath() == null ? "" : withoutTrailingSlashes(withoutLeadingSlashes(uri.getPath()));
  }

  /** A destination as the sidecar names it: {@code s3://bucket/key}, no trailing slash. */
  public static String destination(URI uri) {
    String key = key(uri);
    return "s3://" + uri.getAuthority() + (key.isEmpty() ? "" : "/" + key);
  }

  /** Spark's task file name: {@code <prefix>part-<split, 5 digits>-<job id><suffix>}. */
  public static String partFileName(String prefix, int split, String jobId, String suffix) {
    return String.format("%spart-%05d-%s%s", prefix, split, jobId, suffix);
  }

  /** {@code name} under the task's work path, in the partition directory {@code dir} unless it is null. */
  public static String taskFile(String workPath, String dir, String name) {
    String base = withoutTrailingSlashes(workPath);
    return dir != null ? base + "/" + dir + "/" + name : base + "/" + name;
  }
}
