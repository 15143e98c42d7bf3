// The baselines of the end-to-end benchmark: a bare libmosquitto client that subscribes at
// QoS 1 and counts, and nothing else; with `echo`, it also publishes one QoS 1 retained
// message of a style's size (300 bytes) back for every message, on a second connection as the
// daemon does (both served by the one thread), with at most 1,000 unacknowledged (the rest
// owed, sent as acknowledgements come): the daemon's wire work and nothing else. It prints the seconds from its first message to its EXPECTED-th
// (with `echo`, also to the broker's acknowledgement of its EXPECTED-th publication) and the
// CPU time it used, then exits.
//   bare-subscriber PORT TOPIC EXPECTED TIMEOUT-SECONDS [echo]
#include <mosquitto.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

enum { window = 1000 };

static long expected, received, sent, acknowledged, owed;
static int echo;
static struct timespec first, last_received, last_acknowledged;
static const char *topic;
static struct mosquitto *output;
static char payload[300];

static double seconds(struct timespec a, struct timespec b) {
    return (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
}

// Sends what is owed while the window has room.
static void send_owed(struct mosquitto *client) {
    while (owed > 0 && sent - acknowledged < window) {
        char name[64];
        snprintf(name, sizeof name, "bench-echo/style/%ld", sent);
        sent++;
        owed--;
        mosquitto_publish(output, NULL, name, sizeof payload, payload, 1, true);
    }
}

static void on_connect(struct mosquitto *client, void *context, int code) {
    (void)context;
    if (code != 0) { fprintf(stderr, "bare-subscriber: connection refused (%d)\n", code); exit(1); }
    if (!echo || client != output) mosquitto_subscribe(client, NULL, topic, 1);
}

static void on_subscribe(struct mosquitto *client, void *context, int mid, int count, const int *granted) {
    (void)client; (void)context; (void)mid; (void)count; (void)granted;
    printf("subscribed\n");
    fflush(stdout);
}

static void on_message(struct mosquitto *client, void *context, const struct mosquitto_message *message) {
    (void)context; (void)message;
    if (received == 0) clock_gettime(CLOCK_MONOTONIC, &first);
    if (++received == expected) clock_gettime(CLOCK_MONOTONIC, &last_received);
    if (echo) {
        owed++;
        send_owed(client);
    }
}

static void on_publish(struct mosquitto *client, void *context, int mid) {
    (void)context; (void)mid;
    if (++acknowledged == expected) clock_gettime(CLOCK_MONOTONIC, &last_acknowledged);
    send_owed(client);
}

// One pass over both connections: wait for either, read, write what is queued, keepalive.
static int loop_both(struct mosquitto *input) {
    struct mosquitto *clients[2] = {input, output};
    struct pollfd descriptors[2];
    for (int i = 0; i < 2; i++) {
        descriptors[i].fd = mosquitto_socket(clients[i]);
        descriptors[i].events = POLLIN | (mosquitto_want_write(clients[i]) ? POLLOUT : 0);
    }
    poll(descriptors, 2, 100);
    for (int i = 0; i < 2; i++) {
        int code = MOSQ_ERR_SUCCESS;
        if (descriptors[i].revents & (POLLIN | POLLERR | POLLHUP)) code = mosquitto_loop_read(clients[i], 1);
        if (code == MOSQ_ERR_SUCCESS && mosquitto_want_write(clients[i])) code = mosquitto_loop_write(clients[i], 1);
        if (code == MOSQ_ERR_SUCCESS) code = mosquitto_loop_misc(clients[i]);
        if (code != MOSQ_ERR_SUCCESS) return code;
    }
    return MOSQ_ERR_SUCCESS;
}

int main(int argc, char **argv) {
    if (argc != 5 && !(argc == 6 && strcmp(argv[5], "echo") == 0)) {
        fprintf(stderr, "usage: bare-subscriber PORT TOPIC EXPECTED TIMEOUT-SECONDS [echo]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    topic = argv[2];
    expected = atol(argv[3]);
    double timeout = atof(argv[4]);
    echo = argc == 6;
    memset(payload, 'x', sizeof payload);
    mosquitto_lib_init();
    struct mosquitto *client = mosquitto_new(echo ? "bench-bare-echo" : "bench-bare-subscriber", true, NULL);
    mosquitto_int_option(client, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    if (echo) {
        // The daemon's windows (the subscriber keeps libmosquitto's defaults, as it always has).
        mosquitto_int_option(client, MOSQ_OPT_RECEIVE_MAXIMUM, window);
        mosquitto_int_option(client, MOSQ_OPT_SEND_MAXIMUM, window);
    }
    output = client;
    if (echo) {
        output = mosquitto_new("bench-bare-echo-output", true, NULL);
        mosquitto_int_option(output, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
        mosquitto_int_option(output, MOSQ_OPT_SEND_MAXIMUM, window);
        mosquitto_connect_callback_set(output, on_connect);
        mosquitto_publish_callback_set(output, on_publish);
        if (mosquitto_connect(output, "127.0.0.1", port, 30) != MOSQ_ERR_SUCCESS) { fprintf(stderr, "bare-subscriber: cannot connect\n"); return 1; }
    }
    mosquitto_connect_callback_set(client, on_connect);
    mosquitto_subscribe_callback_set(client, on_subscribe);
    mosquitto_message_callback_set(client, on_message);
    mosquitto_publish_callback_set(client, on_publish);
    if (mosquitto_connect(client, "127.0.0.1", port, 30) != MOSQ_ERR_SUCCESS) { fprintf(stderr, "bare-subscriber: cannot connect\n"); return 1; }
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (received < expected || (echo && acknowledged < expected)) {
        int code = echo ? loop_both(client) : mosquitto_loop(client, 100, 1);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (seconds(start, now) > timeout) break;
        if (code != MOSQ_ERR_SUCCESS && code != MOSQ_ERR_NO_CONN) { fprintf(stderr, "bare-subscriber: %s\n", mosquitto_strerror(code)); break; }
    }
    if (received < expected || (echo && acknowledged < expected)) {
        printf("received %ld, acknowledged %ld of %ld\n", received, acknowledged, expected);
        return 1;
    }
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    double cpu = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
    if (echo)
        printf("received %ld in %.6f s, acknowledged in %.6f s, cpu %.6f s\n", received, seconds(first, last_received),
               seconds(first, last_acknowledged), cpu);
    else
        printf("received %ld in %.6f s, cpu %.6f s\n", received, seconds(first, last_received), cpu);
    if (echo) {
        mosquitto_disconnect(output);
        mosquitto_destroy(output);
    }
    mosquitto_disconnect(client);
    mosquitto_destroy(client);
    mosquitto_lib_cleanup();
    return 0;
}
