package s3commit.bridge;

import org.apache.hadoop.conf.Configuration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * Forwards the relevant part of a Hadoop configuration to the sidecar and remembers the id it gets back.
 *
 * <p>Forwarded: every {@code fs.s3a.*} and {@code s3commit.*} key, plus
 * {@code mapreduce.fileoutputcommitter.marksuccessfuljobs}. Per-bucket keys
 * ({@code fs.s3a.bucket.<bucket>.<key>}) override the plain key for that bucket, as in S3A. Parsing and
 * validation are the Python side's ({@code s3commit.config}). A key whose value only Hadoop's or Spark's
 * defaults gave ({@code core-default.xml}: S3A's defaults, not a setting anyone made) is not forwarded:
 * s3commit's own defaults apply to it, as documented.
 *
 * <p>The sidecar answers which of the forwarded S3A keys s3commit does not support; this JVM names each in a
 * warning once ({@link #warned}).
 *
 * <p>Which store a commit reaches and as whom (the endpoint, region, addressing, TLS, proxy and credentials:
 * {@link #isStoreKey}) is the destination's FileSystem's, not the job's: Hadoop caches one FileSystem per bucket,
 * configured by the first job that used it, and the tasks write their files through it; a committer that read
 * those keys from a later job's configuration (a new session on another endpoint, the same bucket name) would
 * commit on a store the files never reached. {@link #register(Configuration, String, Configuration)} takes them
 * from the FileSystem's configuration and warns, once per difference, where the job's say otherwise.
 *
 * <p>An id is a hash of the keys, the same in every sidecar; this class keeps the keys of each id it has seen
 * (a bounded table, least recently used out) so that it can register them again with a sidecar that does
 * not know them: one started after the last died, or one that dropped the id from its own bounded table.
 */
public final class BridgeConf {
  static final int LIMIT = 1024;
  private static final Map<Map<String, String>, String> IDS = lru();
  private static final Map<String, Map<String, String>> KEYS = lru();
  private static final Map<String, Map<String, Object>> STREAMS = lru();
  private static final Logger LOG = LoggerFactory.getLogger(BridgeConf.class);
  private static final Set<String> WARNED = new HashSet<>();
  private static final Set<String> STORE_WARNED = new HashSet<>();
  private static final Set<String> STORE_KEYS = Set.of("fs.s3a.endpoint", "fs.s3a.endpoint.region",
      "fs.s3a.path.style.access", "fs.s3a.connection.ssl.enabled", "fs.s3a.access.key", "fs.s3a.secret.key",
      "fs.s3a.session.token", "fs.s3a.aws.credentials.provider");
  private static final List<String> STORE_PREFIXES = List.of("fs.s3a.assumed.role.", "fs.s3a.auth.",
      "fs.s3a.proxy.");

  private BridgeConf() {
  }

  private static <K, V> Map<K, V> lru() {
    return Collections.synchronizedMap(new LinkedHashMap<K, V>(16, 0.75f, true) {
      private static final long serialVersionUID = 1L;

      @Override
      protected boolean removeEldestEntry(Map.Entry<K, V> eldest) {
        return size() > LIMIT;
      }
    });
  }

  /** The keys of {@code conf} that s3commit reads, resolved for {@code bucket}. */
  public static Map<String, String> relevant(Configuration conf, String bucket) {
    Map<String, String> keys = new TreeMap<>();
    Map<String, String> perBucket = new HashMap<>();
    String bucketPrefix = "fs.s3a.bucket." + bucket + ".";
    for (Map.Entry<String, String> entry : conf) {
      String key = entry.getKey();
      if (isDefault(conf, key)) {
        continue;
      }
      if (key.startsWith("fs.s3a.bucket.")) {
        if (key.startsWith(bucketPrefix)) {
          perBucket.put("fs.s3a." + key.substring(bucketPrefix.length()), conf.get(key));
        }
      } else if (key.startsWith("fs.s3a.") || key.startsWith("s3commit.")
          || key.equals("mapreduce.fileoutputcommitter.marksuccessfuljobs")) {
        keys.put(key, conf.get(key));  // conf.get resolves ${...} variables
      }
    }
    keys.putAll(perBucket);
    return keys;
  }

  /** Whether only defaults gave {@code key} its value: Hadoop's {@code *-default.xml} files, Spark's defaults. */
  static boolean isDefault(Configuration conf, String key) {
    String[] sources = conf.getPropertySources(key);
    if (sources == null || sources.length == 0) {
      return false;
    }
    for (String source : sources) {
      if (!source.endsWith("-default.xml") && !source.equals("Set by Spark to default values")) {
        return false;
      }
    }
    return true;
  }

  /** Register the configuration (once per distinct set of keys); returns its id. */
  public static String register(Configuration conf, String bucket) throws IOException {
    return register(relevant(conf, bucket));
  }

  /**
   * Register {@code conf}'s keys for a job committing to {@code bucket}, with the store's keys
   * ({@link #isStoreKey}) taken from {@code storeConf}, the configuration of the FileSystem that serves the
   * destination (see the class comment). Where the two disagree, a warning names the keys that differ (and the
   * endpoints, never a credential), once for each difference.
   */
  public static String register(Configuration conf, String bucket, Configuration storeConf) throws IOException {
    Map<String, String> keys = relevant(conf, bucket);
    if (storeConf == null || storeConf == conf) {
      return register(keys);
    }
    Map<String, String> fromJob = storeKeys(keys);
    Map<String, String> fromStore = storeKeys(relevant(storeConf, bucket));
    if (!fromJob.equals(fromStore)) {
      warnStoreOnce(bucket, fromJob, fromStore);
    }
    Map<String, String> merged = new TreeMap<>(keys);
    merged.keySet().removeAll(fromJob.keySet());
    merged.putAll(fromStore);
    return register(merged);
  }

  /** Whether {@code key} says which store is reached, and how or as whom: the FileSystem's, not the job's. */
  static boolean isStoreKey(String key) {
    if (STORE_KEYS.contains(key)) {
      return true;
    }
    for (String prefix : STORE_PREFIXES) {
      if (key.startsWith(prefix)) {
        return true;
      }
    }
    return false;
  }

  private static Map<String, String> storeKeys(Map<String, String> keys) {
    Map<String, String> out = new TreeMap<>();
    keys.forEach((key, value) -> {
      if (isStoreKey(key)) {
        out.put(key, value);
      }
    });
    return out;
  }

  private static void warnStoreOnce(String bucket, Map<String, String> fromJob, Map<String, String> fromStore) {
    Set<String> differing = new TreeSet<>(fromJob.keySet());
    differing.addAll(fromStore.keySet());
    differing.removeIf(key -> Objects.equals(fromJob.get(key), fromStore.get(key)));
    String endpoints = differing.contains("fs.s3a.endpoint")
        ? " (the FileSystem's endpoint " + describe(fromStore.get("fs.s3a.endpoint")) + ", the job's "
            + describe(fromJob.get("fs.s3a.endpoint")) + ")"
        : "";
    String message = "s3a://" + bucket + ": this job's configuration gives other values than the s3a FileSystem "
        + "that Hadoop cached for this bucket when it was first used, for " + String.join(", ", differing) + endpoints
        + ". The job's files are written through that FileSystem, so s3commit commits them on its store too. To "
        + "reach the job's store instead, close the cached FileSystems first "
        + "(org.apache.hadoop.fs.FileSystem.closeAll(), or a new JVM), use another bucket name, or set "
        + "fs.s3a.impl.disable.cache=true.";
    synchronized (STORE_WARNED) {
      if (STORE_WARNED.add(message)) {
        LOG.warn(message);
      }
    }
  }

  private static String describe(String value) {
    return value == null ? "not set" : "'" + value + "'";
  }

  /** The warnings this JVM gave about a job whose store keys differ from its destination FileSystem's. */
  public static Set<String> storeWarnings() {
    synchronized (STORE_WARNED) {
      return new HashSet<>(STORE_WARNED);
    }
  }

  static String register(Map<String, String> keys) throws IOException {
    String id = IDS.get(keys);
    if (id == null) {
      id = send(keys);
      IDS.put(keys, id);
      KEYS.put(id, keys);
    }
    return id;
  }

  @SuppressWarnings("unchecked")
  private static String send(Map<String, String> keys) throws IOException {
    Map<String, Object> args = new HashMap<>();
    args.put("conf", keys);
    Sidecar.Response response = Sidecar.run("conf.register", args);
    String id = (String) response.get("conf_id");
    Object streams = response.get("streams");
    if (streams instanceof Map) {
      STREAMS.put(id, (Map<String, Object>) streams);
    }
    Object unsupported = response.get("unsupported");
    if (unsupported instanceof List) {
      warnOnce((List<Object>) unsupported);
    }
    return id;
  }

  private static void warnOnce(List<Object> unsupported) {
    List<String> fresh = new ArrayList<>();
    synchronized (WARNED) {
      for (Object key : unsupported) {
        if (WARNED.add(String.valueOf(key))) {
          fresh.add(String.valueOf(key));
        }
      }
    }
    if (!fresh.isEmpty()) {
      LOG.warn("s3commit does not support these S3A settings, which therefore have no effect on what it does: {}",
          String.join("; ", fresh));
    }
  }

  /** The unsupported S3A settings this JVM has warned about (each once), as the sidecar named them. */
  public static Set<String> warned() {
    synchronized (WARNED) {
      return new HashSet<>(WARNED);
    }
  }

  /**
   * The stream options the sidecar parsed for configuration {@code id} (read policy, readahead, prefetch and
   * vectored sizes, upload buffer): Python defines every key and default once ({@code s3commit.config}).
   */
  public static Map<String, Object> streamOptions(String id) throws IOException {
    Map<String, Object> options = STREAMS.get(id);
    if (options == null) {
      if (!reregister(id)) {
        throw new IOException("configuration " + id + " is not known to this JVM any more: register it again");
      }
      options = STREAMS.get(id);
    }
    return options;
  }

  /** Register the keys of {@code id} again (with a sidecar that forgot them); false if they are unknown. */
  static boolean reregister(String id) throws IOException {
    Map<String, String> keys = KEYS.get(id);
    if (keys == null) {
      return false;
    }
    String again = send(keys);
    if (!again.equals(id)) {
      throw new IOException("the sidecar gave configuration id " + again + " for the keys of " + id
          + ": the jar and the Python package disagree on how ids are made");
    }
    return true;
  }

  /** How many configurations this JVM remembers (bounded by {@link #LIMIT}). */
  public static int size() {
    return KEYS.size();
  }
}
