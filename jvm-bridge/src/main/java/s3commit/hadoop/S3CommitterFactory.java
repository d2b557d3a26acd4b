package s3commit.hadoop;

import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.lib.output.PathOutputCommitter;
import org.apache.hadoop.mapreduce.lib.output.PathOutputCommitterFactory;

import java.io.IOException;

/**
 * Hadoop's committer factory for {@code s3a://}
 * ({@code mapreduce.outputcommitter.factory.scheme.s3a=s3commit.hadoop.S3CommitterFactory}): every
 * {@code mapreduce.lib.output.FileOutputFormat} writing to S3 (Spark's {@code saveAsNewAPIHadoopFile} and
 * {@code saveAsNewAPIHadoopDataset}) commits through an {@link S3OutputCommitter}. Any other destination (when
 * bound through {@code mapreduce.outputcommitter.factory.class}) gets Hadoop's FileOutputCommitter.
 */
public class S3CommitterFactory extends PathOutputCommitterFactory {
  @Override
  public PathOutputCommitter createOutputCommitter(Path outputPath, TaskAttemptContext context) throws IOException {
    if (SidecarJob.isS3(outputPath)) {
      return new S3OutputCommitter(outputPath, context);
    }
    return createFileOutputCommitter(outputPath, context);
  }
}
