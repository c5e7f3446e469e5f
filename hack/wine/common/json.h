/* json.h: see json.c. */
#ifndef RUNHCS_JSON_H
#define RUNHCS_JSON_H

#include <stddef.h>

/* buf is a growing, always NUL-terminated byte buffer. Functions return 0 when out of memory. */
struct buf {
	char *data;
	size_t len, cap;
};

int buf_add(struct buf *b, const char *s, size_t n);
int buf_adds(struct buf *b, const char *s);
int buf_add_string(struct buf *b, const char *utf8);
void buf_free(struct buf *b);

/* jv is one JSON value: the bytes [p, end). */
struct jv {
	const char *p, *end;
};

/* json_find sets *val to the member key of the object obj; 0 if absent or malformed. */
int json_find(struct jv obj, const char *key, struct jv *val);
/* json_index sets *val to element i of the array arr; 0 if absent. */
int json_index(struct jv arr, int i, struct jv *val);
unsigned long long json_u64(struct jv v);
int json_bool(struct jv v);
/* json_string decodes a JSON string to a malloc'd UTF-8 string; NULL if v is not a string. */
char *json_string(struct jv v);

#endif
