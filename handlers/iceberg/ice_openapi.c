/*
 * ice_openapi.c - the catalog in idemfcgi's OpenAPI document (idemfcgi
 * --openapi): its routes' bodies as JSON Schemas named as the Iceberg
 * REST spec names them (CreateNamespaceRequest, LoadTableResult, ...),
 * written here for what the catalog reads and answers.
 */
#include <stdio.h>
#include <string.h>

#include "iceberg.h"

/* An object of strings (properties, config). */
#define SMAP "{'type':'object','additionalProperties':{'type':'string'}}"

/* The named schemas, as JSON texts; "#N" is "#/components/schemas/N". */
static const struct {
	const char *name, *schema;
} schemas[] = {
	{ "Namespace", "{'type':'array','items':{'type':'string'},"
	    "'description':'The parts of a namespace'}" },
	{ "PageToken", "{'type':['string','null'],'description':'Where the "
	    "next page starts; null or absent on the last'}" },
	{ "TableIdentifier", "{'type':'object','required':['namespace',"
	    "'name'],'properties':{'namespace':{'$ref':'#Namespace'},"
	    "'name':{'type':'string'}}}" },
	{ "CatalogConfig", "{'type':'object','required':['defaults',"
	    "'overrides'],'properties':{'defaults':" SMAP ","
	    "'overrides':" SMAP ",'endpoints':{'type':'array',"
	    "'items':{'type':'string'}},'idempotency-key-lifetime':{'type':"
	    "'string','description':'How long a key answer is kept: ISO-8601'"
	    "}}}" },
	{ "CreateNamespaceRequest", "{'type':'object','required':"
	    "['namespace'],'properties':{'namespace':{'$ref':'#Namespace'},"
	    "'properties':" SMAP "}}" },
	{ "CreateNamespaceResponse", "{'type':'object','required':"
	    "['namespace'],'properties':{'namespace':{'$ref':'#Namespace'},"
	    "'properties':" SMAP "}}" },
	{ "GetNamespaceResponse", "{'type':'object','required':['namespace'],"
	    "'properties':{'namespace':{'$ref':'#Namespace'},'properties':"
	    "" SMAP "}}" },
	{ "ListNamespacesResponse", "{'type':'object','properties':"
	    "{'namespaces':{'type':'array','items':{'$ref':'#Namespace'}},"
	    "'next-page-token':{'$ref':'#PageToken'}}}" },
	{ "UpdateNamespacePropertiesRequest", "{'type':'object','properties':"
	    "{'removals':{'type':'array','items':{'type':'string'}},"
	    "'updates':" SMAP "}}" },
	{ "UpdateNamespacePropertiesResponse", "{'type':'object','required':"
	    "['updated','removed'],'properties':{'updated':{'type':'array',"
	    "'items':{'type':'string'}},'removed':{'type':'array','items':"
	    "{'type':'string'}},'missing':{'type':'array','items':{'type':"
	    "'string'}}}}" },
	{ "ListTablesResponse", "{'type':'object','properties':"
	    "{'identifiers':{'type':'array','items':{'$ref':"
	    "'#TableIdentifier'}},'next-page-token':{'$ref':'#PageToken'}}}" },
	{ "TableMetadata", "{'type':'object','required':['format-version',"
	    "'table-uuid'],'properties':{'format-version':{'type':'integer',"
	    "'minimum':1,'maximum':2},'table-uuid':{'type':'string'},"
	    "'location':{'type':'string'}}}" },
	{ "CreateTableRequest", "{'type':'object','required':['name',"
	    "'schema'],'properties':{'name':{'type':'string'},'location':"
	    "{'type':'string'},'schema':{'type':'object'},'partition-spec':"
	    "{'type':'object'},'write-order':{'type':'object'},"
	    "'stage-create':{'type':'boolean'},'properties':" SMAP "}}" },
	{ "LoadTableResult", "{'type':'object','required':['metadata'],"
	    "'properties':{'metadata-location':{'type':['string','null']},"
	    "'metadata':{'$ref':'#TableMetadata'},'config':" SMAP "}}" },
	{ "TableRequirement", "{'type':'object','required':['type'],"
	    "'properties':{'type':{'type':'string'}}}" },
	{ "TableUpdate", "{'type':'object','required':['action'],"
	    "'properties':{'action':{'type':'string'}}}" },
	{ "CommitTableRequest", "{'type':'object','required':"
	    "['requirements','updates'],'properties':{'identifier':{'$ref':"
	    "'#TableIdentifier'},'requirements':{'type':'array','items':"
	    "{'$ref':'#TableRequirement'}},'updates':{'type':'array','items':"
	    "{'$ref':'#TableUpdate'}}}}" },
	{ "CommitTableResponse", "{'type':'object','required':"
	    "['metadata-location','metadata'],'properties':"
	    "{'metadata-location':{'type':'string'},'metadata':{'$ref':"
	    "'#TableMetadata'}}}" },
	{ "CommitTransactionRequest", "{'type':'object','required':"
	    "['table-changes'],'properties':{'table-changes':{'type':'array',"
	    "'items':{'$ref':'#CommitTableRequest'}}}}" },
	{ "RegisterTableRequest", "{'type':'object','required':['name',"
	    "'metadata-location'],'properties':{'name':{'type':'string'},"
	    "'metadata-location':{'type':'string'},'overwrite':{'type':"
	    "'boolean'}}}" },
	{ "RenameTableRequest", "{'type':'object','required':['source',"
	    "'destination'],'properties':{'source':{'$ref':"
	    "'#TableIdentifier'},'destination':{'$ref':'#TableIdentifier'}}}" },
	{ "ReportMetricsRequest", "{'type':'object','required':"
	    "['report-type'],'properties':{'report-type':{'type':'string'}}}" },
};

/* Each route: its summary and the schemas of its request and answer. */
static const struct {
	const char *method, *path, *summary, *request, *response;
} described[] = {
	{ "GET", "/namespaces", "List namespaces", NULL,
	    "ListNamespacesResponse" },
	{ "POST", "/namespaces", "Create a namespace", "CreateNamespaceRequest",
	    "CreateNamespaceResponse" },
	{ "GET", "/namespaces/{namespace}", "Load a namespace's properties",
	    NULL, "GetNamespaceResponse" },
	{ "HEAD", "/namespaces/{namespace}", "Whether a namespace exists",
	    NULL, NULL },
	{ "DELETE", "/namespaces/{namespace}", "Drop an empty namespace", NULL,
	    NULL },
	{ "POST", "/namespaces/{namespace}/properties", "Set and remove "
	    "properties", "UpdateNamespacePropertiesRequest",
	    "UpdateNamespacePropertiesResponse" },
	{ "GET", "/namespaces/{namespace}/tables", "List tables", NULL,
	    "ListTablesResponse" },
	{ "POST", "/namespaces/{namespace}/tables", "Create a table",
	    "CreateTableRequest", "LoadTableResult" },
	{ "GET", "/namespaces/{namespace}/tables/{table}", "Load a table",
	    NULL, "LoadTableResult" },
	{ "HEAD", "/namespaces/{namespace}/tables/{table}", "Whether a table "
	    "exists", NULL, NULL },
	{ "POST", "/namespaces/{namespace}/tables/{table}", "Commit changes "
	    "to a table", "CommitTableRequest", "CommitTableResponse" },
	{ "DELETE", "/namespaces/{namespace}/tables/{table}", "Drop a table",
	    NULL, NULL },
	{ "POST", "/namespaces/{namespace}/register", "Register a metadata "
	    "file as a table", "RegisterTableRequest", "LoadTableResult" },
	{ "POST", "/namespaces/{namespace}/tables/{table}/metrics", "Report "
	    "metrics", "ReportMetricsRequest", NULL },
	{ "POST", "/tables/rename", "Rename a table", "RenameTableRequest",
	    NULL },
	{ "POST", "/transactions/commit", "Commit changes to several tables, "
	    "all or nothing", "CommitTransactionRequest", NULL },
};

/* A JSON text with ' for " and "#N" for "#/components/schemas/N" as
 * jansson reads it; NULL when out of memory. */
static json_t *
parse(const char *text)
{
	char buf[2048], *o = buf;
	const char *p;
	json_t *j;

	for (p = text; *p != '\0' && o < buf + sizeof(buf) - 32; p++) {
		if (*p == '\'') {
			*o++ = '"';
		} else if (*p == '#') {
			memcpy(o, "#/components/schemas/", 21);
			o += 21;
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
	j = json_loads(buf, 0, NULL);
	return j;
}

/* A {"$ref"} to schema name, or NULL for none. */
static json_t *
ref(const char *name)
{
	char path[96];

	if (name == NULL)
		return NULL;
	snprintf(path, sizeof(path), "#/components/schemas/%s", name);
	return json_pack("{s:s}", "$ref", path);
}

idem_err
ice_openapi_describe(idem_app *app)
{
	static const char *const bases[] = { "/v1", "/v1/{prefix}" };
	char path[160];
	size_t i, b;
	idem_err err = IDEM_OK;

	for (i = 0; err == IDEM_OK && i < sizeof(schemas) / sizeof(schemas[0]);
	    i++) {
		json_t *s = parse(schemas[i].schema);
		err = s == NULL ? IDEM_ERR_NOMEM :
		    idem_app_schema(app, schemas[i].name, s);
		json_decref(s);
	}
	for (i = 0; err == IDEM_OK && i < sizeof(described) /
	    sizeof(described[0]); i++)
		for (b = 0; err == IDEM_OK && b < 2; b++) {
			json_t *rq = ref(described[i].request);
			json_t *rs = ref(described[i].response);
			snprintf(path, sizeof(path), "%s%s", bases[b],
			    described[i].path);
			err = idem_route_describe(app, described[i].method, path,
			    described[i].summary, rq, rs);
			json_decref(rq);
			json_decref(rs);
		}
	if (err == IDEM_OK) {
		json_t *rs = ref("CatalogConfig");
		err = idem_route_describe(app, "GET", "/v1/config", "The "
		    "catalog's configuration", NULL, rs);
		json_decref(rs);
	}
	return err;
}
