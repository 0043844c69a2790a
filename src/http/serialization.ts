import fastJsonStringify from 'fast-json-stringify';

type Serialize = (data: unknown) => string;
type SharedSchemas = Record<string, fastJsonStringify.Schema>;

interface Pending {
  schema: object;
  shared: SharedSchemas;
  sharedKey: string;
}

/**
 * Serializers already built, by response schema and then by the shared schemas (app.addSchema)
 * their $refs resolve against: the route schemas are module constants, the same objects in
 * every app a process starts.
 */
const built = new WeakMap<object, Map<string, Serialize>>();
/** Serializers routes were registered with that no response has needed yet (see compileEverySerializer). */
const pending = new Set<Pending>();

function build(entry: Pending): Serialize {
  const { schema, sharedKey } = entry;
  let bySchema = built.get(schema);
  let serialize = bySchema?.get(sharedKey);
  if (!serialize) {
    serialize = fastJsonStringify(schema as fastJsonStringify.Schema, {
      schema: referenced(schema, entry.shared),
    }) as Serialize;
    if (!bySchema) built.set(schema, (bySchema = new Map()));
    bySchema.set(sharedKey, serialize);
  }
  pending.delete(entry);
  return serialize;
}

/**
 * The shared schemas that schema reaches through its $refs, and those through theirs.
 * fast-json-stringify checks every schema it is given against the JSON Schema meta-schema on
 * each build; given all of them, that was most of each route's build. As Fastify's own
 * compiler, a schema that is itself one of the shared ones is not given twice.
 */
function referenced(schema: object, shared: SharedSchemas): SharedSchemas {
  const own = (schema as { $id?: unknown }).$id;
  const out: SharedSchemas = {};
  const visit = (node: unknown): void => {
    if (typeof node !== 'object' || node === null) return;
    if (Array.isArray(node)) {
      for (const item of node) visit(item);
      return;
    }
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string') {
        const id = value.split('#')[0]!;
        if (id !== '' && id !== own && id in shared && !(id in out)) {
          out[id] = shared[id]!;
          visit(shared[id]);
        }
      } else visit(value);
    }
  };
  visit(schema);
  return out;
}

/**
 * The serializer factory of the apps (Fastify's schemaController.compilersFactory.buildSerializer).
 * Fastify's own builds every response serializer of every route when the app starts: with
 * fast-json-stringify checking each schema against the JSON Schema meta-schema, that was
 * about 2.5 s of CPU before a process could listen, and again for each app a test file
 * starts. Here a route's serializer is built on its first response and kept for the process,
 * so a process starts in a fraction of that and builds only what it answers with.
 * compileEverySerializer builds the rest, for the test that every schema compiles.
 */
export function buildSerializer(shared?: unknown): (route: { schema?: unknown }) => Serialize {
  // Fastify gives the schemas of app.addSchema by $id (none: undefined).
  const schemas = (typeof shared === 'object' && shared !== null ? shared : {}) as SharedSchemas;
  const sharedKey = Object.keys(schemas).sort().join('\n');
  return (route) => {
    const schema = route.schema;
    if (typeof schema !== 'object' || schema === null) throw new TypeError('A response schema is an object');
    const ready = built.get(schema)?.get(sharedKey);
    if (ready) return ready;
    const entry: Pending = { schema, shared: schemas, sharedKey };
    pending.add(entry);
    let serialize: Serialize | undefined;
    return (data: unknown) => (serialize ??= build(entry))(data);
  };
}

/** Builds every serializer still waiting for its first use; throws what fast-json-stringify finds wrong with a schema. */
export function compileEverySerializer(): number {
  const waiting = [...pending];
  for (const entry of waiting) build(entry);
  return waiting.length;
}
