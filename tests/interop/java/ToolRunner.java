// Runs Kafka's command-line tools by main class, one after another, in one JVM: the interop
// tests run dozens of them, and a JVM start with Kafka's classpath costs more than most tools.
//
// Reads one request a line on stdin: base64 tokens separated by spaces, the main class, the
// standard input to give the tool ("-" for none), then its arguments. Answers each with one
// line "RESULT <exit code> <base64 stdout> <base64 stderr>". A tool's Exit.exit(code) ends the
// tool, not the JVM (Kafka's tools all exit through org.apache.kafka.common.utils.Exit): it
// throws, and the first code asked for is the tool's exit code, even when the tool catches the
// throwable on its way out (some do, and print it: those lines are left out of its stderr). Its
// shutdown hooks are not registered. Log4j's console appender must follow System.err
// ("follow = true") for a tool's log lines to be captured.

import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Base64;

import org.apache.kafka.common.utils.Exit;

public class ToolRunner {
    static final String MARKER = "tool-runner-exit";

    static final class ToolExit extends RuntimeException {
        ToolExit() {
            super(MARKER, null, false, false);
        }
    }

    /** The first exit code the running tool asked for, or null. */
    static volatile Integer exitCode;

    public static void main(String[] args) throws Exception {
        PrintStream protocol = System.out;
        InputStream originalIn = System.in;
        Exit.Procedure exit = (code, message) -> {
            if (exitCode == null) {
                exitCode = code;
            }
            throw new ToolExit();
        };
        Exit.setExitProcedure(exit);
        Exit.setHaltProcedure(exit);
        Exit.setShutdownHookAdder((name, runnable) -> { });
        Base64.Decoder decoder = Base64.getDecoder();
        Base64.Encoder encoder = Base64.getEncoder();
        BufferedReader requests = new BufferedReader(new InputStreamReader(originalIn, StandardCharsets.UTF_8));
        String line;
        while ((line = requests.readLine()) != null) {
            String[] tokens = line.trim().split(" ");
            String mainClass = new String(decoder.decode(tokens[0]), StandardCharsets.UTF_8);
            byte[] input = tokens[1].equals("-") ? new byte[0] : decoder.decode(tokens[1]);
            String[] toolArgs = Arrays.stream(tokens, 2, tokens.length)
                    .map(token -> new String(decoder.decode(token), StandardCharsets.UTF_8))
                    .toArray(String[]::new);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            PrintStream toolOut = new PrintStream(out, true, StandardCharsets.UTF_8);
            PrintStream toolErr = new PrintStream(err, true, StandardCharsets.UTF_8);
            System.setOut(toolOut);
            System.setErr(toolErr);
            System.setIn(new ByteArrayInputStream(input));
            exitCode = null;
            int code = run(mainClass, toolArgs, toolErr);
            if (exitCode != null) {
                code = exitCode;
            }
            toolOut.flush();
            toolErr.flush();
            System.setOut(protocol);
            String errText = err.toString(StandardCharsets.UTF_8).lines()
                    .filter(errLine -> !errLine.contains(MARKER))
                    .map(errLine -> errLine + "\n")
                    .reduce("", String::concat);
            protocol.println("RESULT " + code + " " + encoder.encodeToString(out.toByteArray()) + " "
                    + encoder.encodeToString(errText.getBytes(StandardCharsets.UTF_8)));
            protocol.flush();
        }
    }

    static int run(String mainClass, String[] args, PrintStream err) {
        try {
            Method main = Class.forName(mainClass).getMethod("main", String[].class);
            main.invoke(null, (Object) args);
            return 0;
        } catch (InvocationTargetException wrapped) {
            Throwable cause = wrapped.getCause();
            if (cause instanceof ToolExit) {
                return 0;  // the code is exitCode
            }
            cause.printStackTrace(err);
            return 1;
        } catch (ReflectiveOperationException missing) {
            missing.printStackTrace(err);
            return 127;
        }
    }
}
