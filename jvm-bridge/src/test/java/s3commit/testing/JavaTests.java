package s3commit.testing;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.Arrays;
import java.util.Comparator;

/**
 * A small test runner for the bridge's Java classes, run without Maven or JUnit (neither is reachable here):
 * {@code java -cp <classes>:<jars> s3commit.testing.JavaTests <class>...} runs every {@code public static void
 * test*()} method of each class and prints one line per test, {@code PASS <class>.<method>} or
 * {@code FAIL <class>.<method>: <reason>}, then exits with the number of failures (0: all passed). The pytest
 * suite ({@code tests/jvm}) builds and runs it and reports each Java test as its own test.
 */
public final class JavaTests {
  private JavaTests() {
  }

  /** A failed expectation. */
  public static final class Failure extends AssertionError {
    private static final long serialVersionUID = 1L;

    public Failure(String message) {
      super(message);
    }
  }

  public static void check(boolean condition, String what) {
    if (!condition) {
      throw new Failure(what);
    }
  }

  public static void equal(Object expected, Object actual, String what) {
    if (expected == null ? actual != null : !expected.equals(actual)) {
      throw new Failure(what + ": expected <" + expected + "> but was <" + actual + ">");
    }
  }

  /** Run {@code action}; it must throw {@code type} (returned for further checks). */
  public static <T extends Throwable> T raises(Class<T> type, ThrowingRunnable action, String what) {
    try {
      action.run();
    } catch (Throwable e) {
      if (type.isInstance(e)) {
        return type.cast(e);
      }
      throw new Failure(what + ": expected " + type.getSimpleName() + " but got " + e);
    }
    throw new Failure(what + ": expected " + type.getSimpleName() + " but nothing was thrown");
  }

  /** Code that may throw anything. */
  public interface ThrowingRunnable {
    void run() throws Throwable;
  }

  public static void main(String[] args) throws Exception {
    int failures = 0;
    for (String name : args) {
      Class<?> type = Class.forName(name);
      Method[] methods = type.getDeclaredMethods();
      Arrays.sort(methods, Comparator.comparing(Method::getName));
      for (Method method : methods) {
        if (!method.getName().startsWith("test") || !Modifier.isStatic(method.getModifiers())
            || method.getParameterCount() != 0) {
          continue;
        }
        String id = type.getSimpleName() + "." + method.getName();
        try {
          method.setAccessible(true);
          method.invoke(null);
          System.out.println("PASS " + id);
        } catch (InvocationTargetException e) {
          failures++;
          Throwable cause = e.getCause();
          StringWriter trace = new StringWriter();
          cause.printStackTrace(new PrintWriter(trace));
          System.out.println("FAIL " + id + ": " + String.valueOf(cause).replace('\n', ' ') + " | "
              + trace.toString().replace('\n', ' ').replace('\t', ' '));
        }
      }
    }
    System.out.flush();
    System.exit(Math.min(failures, 100));
  }
}
