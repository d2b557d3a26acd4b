package s3commit.hadoop;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.DelegateToFileSystem;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;

/**
 * Hadoop's {@code AbstractFileSystem} for {@code s3a://} ({@code fs.AbstractFileSystem.s3a.impl}), the binding
 * Hadoop's {@code FileContext} needs; a pip-installed PySpark has none (hadoop-aws's {@code S3A} is the usual
 * one). Everything is delegated to {@link S3FileSystem}, so it behaves exactly as the FileSystem does: in
 * particular its rename is a COPY and a DELETE. Spark's default checkpoint manager
 * ({@code FileContextBasedCheckpointFileManager}) works through it, renames and all; s3commit's own
 * ({@code s3commit.spark.S3CheckpointFileManager}) needs no rename and does not use it.
 */
public class S3AbstractFileSystem extends DelegateToFileSystem {
  public S3AbstractFileSystem(URI uri, Configuration conf) throws IOException, URISyntaxException {
    super(uri, new S3FileSystem(), conf, "s3a", false);
  }

  /** S3 has no port (as hadoop-aws's binding says). */
  @Override
  public int getUriDefaultPort() {
    return -1;
  }
}
