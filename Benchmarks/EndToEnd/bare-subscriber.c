// The baseline of the end-to-end benchmark: a bare libmosquitto subscriber that subscribes
// at QoS 1, counts, and does nothing else. It prints the seconds from its first message to
// its EXPECTED-th and the CPU time it used, then exits.
//   bare-subscriber PORT TOPIC EXPECTED TIMEOUT-SECONDS
#include <mosquitto.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

static long expected, received;
static struct timespec first, last;
static const char *topic;

static double seconds(struct timespec a, struct timespec b) {
    return (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
}

static void on_connect(struct mosquitto *client, void *context, int code) {
    (void)context;
    if (code != 0) { fprintf(stderr, "bare-subscriber: connection refused (%d)\n", code); exit(1); }
    mosquitto_subscribe(client, NULL, topic, 1);
}

static void on_subscribe(struct mosquitto *client, void *context, int mid, int count, const int *granted) {
    (void)client; (void)context; (void)mid; (void)count; (void)granted;
    printf("subscribed\n");
    fflush(stdout);
}

static void on_message(struct mosquitto *client, void *context, const struct mosquitto_message *message) {
    (void)context; (void)message;
    if (received == 0) clock_gettime(CLOCK_MONOTONIC, &first);
    if (++received == expected) {
        clock_gettime(CLOCK_MONOTONIC, &last);
        mosquitto_disconnect(client);
    }
}

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: bare-subscriber PORT TOPIC EXPECTED TIMEOUT-SECONDS\n"); return 2; }
    int port = atoi(argv[1]);
    topic = argv[2];
    expected = atol(argv[3]);
    double timeout = atof(argv[4]);
    mosquitto_lib_init();
    struct mosquitto *client = mosquitto_new("bench-bare-subscriber", true, NULL);
    mosquitto_int_option(client, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_connect_callback_set(client, on_connect);
    mosquitto_subscribe_callback_set(client, on_subscribe);
    mosquitto_message_callback_set(client, on_message);
    if (mosquitto_connect(client, "127.0.0.1", port, 30) != MOSQ_ERR_SUCCESS) { fprintf(stderr, "bare-subscriber: cannot connect\n"); return 1; }
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (received < expected) {
        int code = mosquitto_loop(client, 100, 1);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (seconds(start, now) > timeout) break;
        if (code != MOSQ_ERR_SUCCESS && code != MOSQ_ERR_NO_CONN) { fprintf(stderr, "bare-subscriber: %s\n", mosquitto_strerror(code)); break; }
    }
    if (received < expected) { printf("received %ld of %ld\n", received, expected); return 1; }
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    double cpu = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
    printf("received %ld in %.6f s, cpu %.6f s\n", received, seconds(first, last), cpu);
    mosquitto_destroy(client);
    mosquitto_lib_cleanup();
    return 0;
}
