package s3commit.hadoop;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;

import s3commit.bridge.BridgeConf;

import java.io.IOException;
import java.net.URI;

/**
 * The configuration a committer registers for a destination: the job's keys, with the store reached as the
 * destination's FileSystem reaches it ({@link BridgeConf#register(Configuration, String, Configuration)}), since
 * the tasks' files go through that FileSystem (Hadoop's cached instance for the bucket).
 */
public final class StoreConf {
  private StoreConf() {
  }

  /** The conf_id for committing to {@code dest} ({@code s3a://bucket/...}) under the job configuration {@code conf}. */
  public static String register(Configuration conf, URI dest) throws IOException {
    String bucket = dest.getAuthority();
    return BridgeConf.register(conf, bucket, fileSystemConf(conf, dest));
  }

  /** The configuration of the s3commit FileSystem serving {@code dest}, or null where another (or none) serves it. */
  static Configuration fileSystemConf(Configuration conf, URI dest) {
    try {
      FileSystem fs = FileSystem.get(URI.create(dest.getScheme() + "://" + dest.getAuthority() + "/"), conf);
      return fs instanceof S3FileSystem ? fs.getConf() : null;
    } catch (IOException | IllegalArgumentException e) {
      return null;  // no FileSystem for the scheme: nothing wrote through one, the job's keys are the store's
    }
  }
}
