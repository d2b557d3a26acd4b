package s3commit.hadoop;

import org.apache.hadoop.conf.Configuration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.ref.WeakReference;
import java.lang.reflect.Field;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.WeakHashMap;

/**
 * The bridge's Hadoop classes by name, for Hadoop {@link Configuration}s whose class loader does not see the jar.
 *
 * <p>A {@code Configuration} resolves {@code fs.s3a.impl} (and every class-valued key) with the class loader it
 * was created under: the creating thread's context class loader, else Hadoop's own. Spark adds {@code spark.jars}
 * to its task class loader only, so a {@code Configuration} created by one of Spark's own threads (the executor's
 * block-manager decommissioning, its RPC endpoints, the start of an executor fetching {@code spark.files}) names
 * {@code s3commit.hadoop.S3FileSystem} and fails with {@code ClassNotFoundException}. The bridge jar on the JVM's
 * system classpath ({@code spark.executor.extraClassPath}, {@code spark.driver.extraClassPath}: what
 * {@code configure()} sets) is the cure. Where the jar is not there when the JVM starts (a jar that arrives with
 * the application: {@code spark.jars}, or inside a {@code --archives} virtualenv that the executor unpacks after
 * it started), {@link #ensureVisible} enters the bridge's classes in Hadoop's per-class-loader cache of classes by
 * name for the JVM's system class loader, the loader of those threads, so that their {@code Configuration}s find
 * them. {@code s3commit.spark.S3CommitPlugin} calls it when each executor (and the driver) starts.
 */
public final class HadoopClassNames {
  private static final Logger LOG = LoggerFactory.getLogger(HadoopClassNames.class);
  /** The classes Hadoop's configuration keys name ({@code configure()}'s {@code spark.hadoop.*} bindings). */
  static final List<Class<?>> CLASSES = List.of(S3FileSystem.class, S3AbstractFileSystem.class,
      S3CommitterFactory.class, S3MapRedCommitter.class, S3OutputCommitter.class);

  private HadoopClassNames() {
  }

  /**
   * Make the bridge's Hadoop classes resolvable by name from a {@code Configuration} under the system class
   * loader. Returns what was done: {@code "system classpath"} (the loader already sees the jar: nothing to do),
   * {@code "registered"}, or {@code "unavailable: <reason>"} (this Hadoop keeps no such cache: logged).
   */
  public static String ensureVisible() {
    ClassLoader system = ClassLoader.getSystemClassLoader();
    Set<ClassLoader> blind = new LinkedHashSet<>();
    for (ClassLoader loader : new ClassLoader[] {system, Configuration.class.getClassLoader()}) {
      if (loader != null && !sees(loader)) {
        blind.add(loader);
      }
    }
    if (blind.isEmpty()) {
      return "system classpath";
    }
    try {
      register(blind);
    } catch (ReflectiveOperationException | RuntimeException e) {
      LOG.warn("s3commit: Hadoop's class cache could not be reached ({}); Spark's own threads resolve "
          + "s3commit's classes only if the bridge jar is on this JVM's classpath (spark.executor.extraClassPath, "
          + "spark.driver.extraClassPath)", e.toString());
      return "unavailable: " + e;
    }
    LOG.info("s3commit: the bridge's Hadoop classes are registered for Hadoop configurations under {}", blind);
    return "registered";
  }

  /** Whether {@code loader} resolves the bridge's FileSystem to this very class. */
  static boolean sees(ClassLoader loader) {
    try {
      return Class.forName(S3FileSystem.class.getName(), false, loader) == S3FileSystem.class;
    } catch (ClassNotFoundException | LinkageError e) {
      return false;
    }
  }

  @SuppressWarnings("unchecked")
  private static void register(Set<ClassLoader> loaders) throws ReflectiveOperationException {
    Field field = Configuration.class.getDeclaredField("CACHE_CLASSES");
    field.setAccessible(true);
    Map<ClassLoader, Map<String, WeakReference<Class<?>>>> cache =
        (Map<ClassLoader, Map<String, WeakReference<Class<?>>>>) field.get(null);
    synchronized (cache) {  // Hadoop's own lock for this map
      for (ClassLoader loader : loaders) {
        Map<String, WeakReference<Class<?>>> byName = cache.computeIfAbsent(loader,
            k -> Collections.synchronizedMap(new WeakHashMap<>()));
        for (Class<?> cls : CLASSES) {
          // The key is the Class's own name string (held by the Class, so the weak key lives as long as it
          // does); the class is held by the loader that defined it (Spark's task class loader, for the executor's
          // life). A negative entry from an earlier failed lookup is replaced.
          byName.put(cls.getName(), new WeakReference<>(cls));
        }
      }
    }
  }
}
