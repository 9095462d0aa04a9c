/*
 * notes.c - a third-party idemfcgi plugin, built outside the idemfcgi tree
 * against the installed header and library only (see Makefile).
 *
 *   POST /notes        {"text": "..."}  -> 201 {"id": n, "text": "..."}
 *   GET  /notes/{id}                    -> 200 {"id": n, "text": "..."}
 *
 * Creating a note is a side effect a retry must not repeat, so POST keeps
 * the server's default idempotency policy: with a key, a retried POST gets
 * the first answer (the same id) instead of a second note.
 *
 *   [notes]
 *   max-notes = 1000     # how many notes are kept
 *   max-length = 280     # bytes of text
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <idemfcgi.h>

typedef struct notes {
	pthread_mutex_t lock;      /* handlers run on many threads */
	char **text;               /* text[i] is note i + 1 */
	long long count, max_notes, max_length;
} notes;

/* POST /notes */
static idem_err
create(const idem_request *req, idem_response *res, void *data)
{
	notes *n = data;
	json_t *body = idem_request_json(req, NULL);   /* ours to decref */
	const char *text = json_string_value(json_object_get(body, "text"));
	char *copy;
	long long id;

	if (text == NULL || strlen(text) > (size_t)n->max_length) {
		json_decref(body);
		return idem_response_problem(res, 422, "INVALID_NOTE",
		    "expected {\"text\": \"...\"} within max-length");
	}
	if ((copy = strdup(text)) == NULL) {
		json_decref(body);
		return IDEM_ERR_NOMEM;             /* the client gets a 500 */
	}
	json_decref(body);
	pthread_mutex_lock(&n->lock);
	if (n->count == n->max_notes) {
		pthread_mutex_unlock(&n->lock);
		free(copy);
		return idem_response_problem(res, 409, "NOTES_FULL",
		    "max-notes notes are kept already");
	}
	n->text[n->count] = copy;
	id = ++n->count;
	pthread_mutex_unlock(&n->lock);
	idem_log(req, IDEM_LOG_INFO, "notes: created note %lld", id);
	return idem_response_json(res, 201, json_pack("{s:I, s:s}", "id",
	    (json_int_t)id, "text", copy));
}

/* GET /notes/{id} */
static idem_err
show(const idem_request *req, idem_response *res, void *data)
{
	notes *n = data;
	long long id = atoll(idem_request_param(req, "id"));
	json_t *j = NULL;

	pthread_mutex_lock(&n->lock);
	if (id >= 1 && id <= n->count)
		j = json_pack("{s:I, s:s}", "id", (json_int_t)id,
		    "text", n->text[id - 1]);
	pthread_mutex_unlock(&n->lock);
	if (j == NULL)
		return idem_response_problem(res, 404, "NOTE_NOT_FOUND", NULL);
	return idem_response_json(res, 200, j);
}

static void
teardown(void *data)
{
	notes *n = data;
	long long i;

	for (i = 0; i < n->count; i++)
		free(n->text[i]);
	free(n->text);
	pthread_mutex_destroy(&n->lock);
	free(n);
}

static idem_err
setup(idem_app *app, void **data)
{
	notes *n = calloc(1, sizeof(*n));
	idem_err err;

	if (n == NULL)
		return IDEM_ERR_NOMEM;
	pthread_mutex_init(&n->lock, NULL);
	if ((err = idem_config_int(app, "max-notes", 1000, 1, 1000000,
	    &n->max_notes)) != IDEM_OK ||
	    (err = idem_config_int(app, "max-length", 280, 1, 65536,
	    &n->max_length)) != IDEM_OK ||
	    (n->text = calloc((size_t)n->max_notes, sizeof(char *))) == NULL ||
	    (err = idem_route_add(app, "POST", "/notes", IDEM_POLICY_DEFAULT,
	    create, n)) != IDEM_OK ||
	    (err = idem_route_add(app, "GET", "/notes/{id}", IDEM_POLICY_OFF,
	    show, n)) != IDEM_OK) {
		teardown(n);
		return err != IDEM_OK ? err : IDEM_ERR_NOMEM;
	}
	*data = n;
	return IDEM_OK;
}

int
idem_plugin_init(idem_plugin *p)
{
	p->abi_version = IDEM_ABI_VERSION;
	p->name = "notes";
	p->setup = setup;
	p->teardown = teardown;
	return 0;
}
