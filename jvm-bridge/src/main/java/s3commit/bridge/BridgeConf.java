package s3commit.bridge;

import org.apache.hadoop.conf.Configuration;

import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Forwards the relevant part of a Hadoop configuration to the sidecar and remembers the id it gets back.
 *
 * <p>Forwarded: every {@code fs.s3a.*} and {@code s3commit.*} key, plus
 * {@code mapreduce.fileoutputcommitter.marksuccessfuljobs}. Per-bucket keys
 * ({@code fs.s3a.bucket.<bucket>.<key>}) override the plain key for that bucket, as in S3A. Parsing and
 * validation are the Python side's ({@code s3commit.config}).
 */
public final class BridgeConf {
  private static final Map<Map<String, String>, String> IDS = new ConcurrentHashMap<>();

  private BridgeConf() {
  }

  /** The keys of {@code conf} that s3commit reads, resolved for {@code bucket}. */
  public static Map<String, String> relevant(Configuration conf, String bucket) {
    Map<String, String> keys = new TreeMap<>();
    Map<String, String> perBucket = new HashMap<>();
    String bucketPrefix = "fs.s3a.bucket." + bucket + ".";
    for (Map.Entry<String, String> entry : conf) {
      String key = entry.getKey();
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

  /** Register the configuration with the sidecar (once per distinct set of keys); returns its id. */
  public static String register(Sidecar sidecar, Configuration conf, String bucket) throws IOException {
    Map<String, String> keys = relevant(conf, bucket);
    String id = IDS.get(keys);
    if (id == null) {
      Map<String, Object> args = new HashMap<>();
      args.put("conf", keys);
      id = (String) sidecar.call("conf.register", args).get("conf_id");
      IDS.put(keys, id);
    }
    return id;
  }
}
