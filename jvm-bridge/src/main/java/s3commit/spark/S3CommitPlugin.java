package s3commit.spark;

import org.apache.spark.SparkContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;

import s3commit.hadoop.HadoopClassNames;

import java.util.Collections;
import java.util.Map;

/**
 * {@code spark.plugins=s3commit.spark.S3CommitPlugin} (set by {@code configure()}): when the driver and each
 * executor start, makes the bridge's Hadoop classes resolvable from Spark's own threads even where the bridge jar
 * is not on the JVM's classpath ({@link HadoopClassNames#ensureVisible}). Where it is (the default wherever the
 * jar lies on the node when the JVM starts), it does nothing.
 */
public class S3CommitPlugin implements SparkPlugin {
  @Override
  public DriverPlugin driverPlugin() {
    return new DriverPlugin() {
      @Override
      public Map<String, String> init(SparkContext sc, PluginContext context) {
        HadoopClassNames.ensureVisible();
        return Collections.emptyMap();
      }
    };
  }

  @Override
  public ExecutorPlugin executorPlugin() {
    return new ExecutorPlugin() {
      @Override
      public void init(PluginContext context, Map<String, String> extraConf) {
        HadoopClassNames.ensureVisible();
      }
    };
  }
}
