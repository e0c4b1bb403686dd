/*
 * copdrv-rules.c - checks a stream file against the driver's writer rules
 * (stream-rules.h), for tests of streams that other programs wrote (copsim
 * --stream-out, the control interface).
 *
 *   copdrv-rules FILE
 *
 * Prints the checker's summary (per slot, per context, the violations) and
 * exits 0 when the stream keeps every rule, 1 when it breaks one, 2 when
 * FILE cannot be read.
 */
#include "kernel-driver/tests/stream-rules.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	struct stream_rules *rules;
	char buf[65536];
	size_t got;
	FILE *in;
	int status;

	if (argc != 2) {
		fputs("usage: copdrv-rules FILE\n", stderr);
		return 2;
	}
	in = fopen(argv[1], "rb");
	if (!in) {
		fprintf(stderr, "copdrv-rules: %s: %s\n", argv[1],
			strerror(errno));
		return 2;
	}
	rules = stream_rules_new();
	while ((got = fread(buf, 1, sizeof(buf), in)) > 0)
		stream_rules_feed(rules, buf, got);
	stream_rules_finish(rules);
	fclose(in);
	stream_rules_print(rules, stdout);
	status = rules->violations ? 1 : 0;
	stream_rules_free(rules);
	return status;
}
