/*
 * json.c: the little JSON the stand-in DLLs (computecore.dll, vmcompute.dll) need to speak hcsemu's wire protocol
 * (internal/hcsemu/wire): building request frames, and reading fields of response and event
 * frames. Not a general parser: it finds a key among an object's members and decodes strings,
 * numbers and booleans; everything else is skipped over correctly (nested values, escapes).
 */
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* ---- building ---- */

static int buf_grow(struct buf *b, size_t more)
{
	size_t want = b->len + more + 1;
	char *p;

	if (want <= b->cap)
		return 1;
	if (want < 2 * b->cap)
		want = 2 * b->cap;
	p = realloc(b->data, want);
	if (p == NULL)
		return 0;
	b->data = p;
	b->cap = want;
	return 1;
}

int buf_add(struct buf *b, const char *s, size_t n)
{
	if (!buf_grow(b, n))
		return 0;
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = 0;
	return 1;
}

int buf_adds(struct buf *b, const char *s)
{
	return buf_add(b, s, strlen(s));
}

/* buf_add_string appends s (UTF-8) as a JSON string. */
int buf_add_string(struct buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	int ok = buf_add(b, "\"", 1);

	for (; ok && *p; p++) {
		char esc[7];

		switch (*p) {
		case '"':
			ok = buf_add(b, "\\\"", 2);
			break;
		case '\\':
			ok = buf_add(b, "\\\\", 2);
			break;
		case '\n':
			ok = buf_add(b, "\\n", 2);
			break;
		case '\r':
			ok = buf_add(b, "\\r", 2);
			break;
		case '\t':
			ok = buf_add(b, "\\t", 2);
			break;
		default:
			if (*p < 0x20) {
				memcpy(esc, "\\u00", 4);
				esc[4] = hex[*p >> 4];
				esc[5] = hex[*p & 15];
				ok = buf_add(b, esc, 6);
			} else {
				ok = buf_add(b, (const char *)p, 1);
			}
		}
	}
	return ok && buf_add(b, "\"", 1);
}

void buf_free(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

/* ---- reading ---- */

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

static const char *skip_string(const char *p, const char *end)
{
	if (p >= end || *p != '"')
		return NULL;
	for (p++; p < end; p++) {
		if (*p == '\\')
			p++;
		else if (*p == '"')
			return p + 1;
	}
	return NULL;
}

/* skip_value returns the first byte after the value at p, or NULL if it is malformed. */
static const char *skip_value(const char *p, const char *end)
{
	int depth = 0;

	p = skip_ws(p, end);
	if (p >= end)
		return NULL;
	if (*p == '"')
		return skip_string(p, end);
	if (*p != '{' && *p != '[') {
		while (p < end && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' &&
		       *p != '\r' && *p != '\t')
			p++;
		return p;
	}
	for (; p < end; p++) {
		if (*p == '"') {
			p = skip_string(p, end);
			if (p == NULL)
				return NULL;
			p--;
		} else if (*p == '{' || *p == '[') {
			depth++;
		} else if (*p == '}' || *p == ']') {
			if (--depth == 0)
				return p + 1;
		}
	}
	return NULL;
}

int json_find(struct jv obj, const char *key, struct jv *val)
{
	const char *p = skip_ws(obj.p, obj.end);
	size_t klen = strlen(key);

	if (p >= obj.end || *p != '{')
		return 0;
	p++;
	for (;;) {
		const char *k, *kend, *v;

		p = skip_ws(p, obj.end);
		if (p >= obj.end || *p == '}')
			return 0;
		k = p;
		kend = skip_string(p, obj.end);
		if (kend == NULL)
			return 0;
		p = skip_ws(kend, obj.end);
		if (p >= obj.end || *p != ':')
			return 0;
		v = skip_ws(p + 1, obj.end);
		p = skip_value(v, obj.end);
		if (p == NULL)
			return 0;
		/* Keys here are plain ASCII, so comparing the raw bytes is enough. */
		if ((size_t)(kend - k - 2) == klen && memcmp(k + 1, key, klen) == 0) {
			val->p = v;
			val->end = p;
			return 1;
		}
		p = skip_ws(p, obj.end);
		if (p < obj.end && *p == ',')
			p++;
	}
}

int json_index(struct jv arr, int i, struct jv *val)
{
	const char *p = skip_ws(arr.p, arr.end);

	if (p >= arr.end || *p != '[')
		return 0;
	p++;
	for (;;) {
		const char *v = skip_ws(p, arr.end);

		if (v >= arr.end || *v == ']')
			return 0;
		p = skip_value(v, arr.end);
		if (p == NULL)
			return 0;
		if (i-- == 0) {
			val->p = v;
			val->end = p;
			return 1;
		}
		p = skip_ws(p, arr.end);
		if (p < arr.end && *p == ',')
			p++;
	}
}

unsigned long long json_u64(struct jv v)
{
	unsigned long long n = 0;
	const char *p = skip_ws(v.p, v.end);

	for (; p < v.end && *p >= '0' && *p <= '9'; p++)
		n = n * 10 + (unsigned long long)(*p - '0');
	return n;
}

int json_bool(struct jv v)
{
	const char *p = skip_ws(v.p, v.end);

	return v.end - p >= 4 && memcmp(p, "true", 4) == 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int read_u16(const char *p, const char *end, unsigned *out)
{
	unsigned u = 0;
	int i;

	if (end - p < 4)
		return 0;
	for (i = 0; i < 4; i++) {
		int h = hexval(p[i]);

		if (h < 0)
			return 0;
		u = u << 4 | (unsigned)h;
	}
	*out = u;
	return 1;
}

static void put_utf8(struct buf *b, unsigned cp)
{
	char s[4];

	if (cp < 0x80) {
		s[0] = (char)cp;
		buf_add(b, s, 1);
	} else if (cp < 0x800) {
		s[0] = (char)(0xC0 | cp >> 6);
		s[1] = (char)(0x80 | (cp & 0x3F));
		buf_add(b, s, 2);
	} else if (cp < 0x10000) {
		s[0] = (char)(0xE0 | cp >> 12);
		s[1] = (char)(0x80 | (cp >> 6 & 0x3F));
		s[2] = (char)(0x80 | (cp & 0x3F));
		buf_add(b, s, 3);
	} else {
		s[0] = (char)(0xF0 | cp >> 18);
		s[1] = (char)(0x80 | (cp >> 12 & 0x3F));
		s[2] = (char)(0x80 | (cp >> 6 & 0x3F));
		s[3] = (char)(0x80 | (cp & 0x3F));
		buf_add(b, s, 4);
	}
}

char *json_string(struct jv v)
{
	struct buf b = {0};
	const char *p = skip_ws(v.p, v.end);

	if (p >= v.end || *p != '"')
		return NULL;
	buf_add(&b, "", 0);
	for (p++; p < v.end && *p != '"'; p++) {
		unsigned cp, lo;

		if (*p != '\\') {
			buf_add(&b, p, 1);
			continue;
		}
		if (++p >= v.end)
			break;
		switch (*p) {
		case 'n':
			buf_add(&b, "\n", 1);
			break;
		case 'r':
			buf_add(&b, "\r", 1);
			break;
		case 't':
			buf_add(&b, "\t", 1);
			break;
		case 'b':
			buf_add(&b, "\b", 1);
			break;
		case 'f':
			buf_add(&b, "\f", 1);
			break;
		case 'u':
			if (!read_u16(p + 1, v.end, &cp))
				goto bad;
			p += 4;
			/* A surrogate pair (Go's encoder writes \ud83d\ude00 for U+1F600). */
			if (cp >= 0xD800 && cp < 0xDC00 && v.end - p > 6 && p[1] == '\\' && p[2] == 'u' &&
			    read_u16(p + 3, v.end, &lo) && lo >= 0xDC00 && lo < 0xE000) {
				cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
				p += 6;
			}
			put_utf8(&b, cp);
			break;
		default: /* \" \\ \/ */
			buf_add(&b, p, 1);
		}
	}
	if (b.data == NULL)
		return NULL;
	return b.data;
bad:
	buf_free(&b);
	return NULL;
}
