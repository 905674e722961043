// DynamoDBLocalLoopback starts DynamoDB Local bound to 127.0.0.1 only.
//
// DynamoDB Local has no bind-address flag and listens on every interface by
// default. This single-file program (run with `java DynamoDBLocalLoopback.java`
// and the DynamoDB Local jars on the classpath) builds the server from the
// usual command-line arguments, moves its Jetty connector to the loopback
// address, then starts it. It exits when its standard input closes, so the
// process never outlives the test run or `make run` that started it.
import java.lang.reflect.Field;

import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public class DynamoDBLocalLoopback {
    public static void main(String[] args) throws Exception {
        String host = System.getProperty("bind.host", "127.0.0.1");
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        Field f = DynamoDBProxyServer.class.getDeclaredField("server");
        f.setAccessible(true);
        Server server = (Server) f.get(proxy);
        for (Connector c : server.getConnectors()) {
            if (c instanceof ServerConnector sc) {
                sc.setHost(host);
            }
        }
        proxy.start();
        System.out.println("DynamoDB Local listening on " + host);
        System.out.flush();
        if (Boolean.getBoolean("exit.on.stdin.close")) {
            while (System.in.read() != -1) {
                // Drain until the parent closes our stdin.
            }
            proxy.stop();
            System.exit(0);
        }
        proxy.join();
    }
}
