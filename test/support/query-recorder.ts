import type {
  CompiledQuery,
  Kysely,
  KyselyPlugin,
  PluginTransformQueryArgs,
  PluginTransformResultArgs,
  QueryId,
  QueryResult,
  RootOperationNode,
  UnknownRow,
} from 'kysely';

/** A Kysely plugin that keeps every query going through it, to be compiled and explained afterwards. */
export class QueryRecorder implements KyselyPlugin {
  readonly queries: { node: RootOperationNode; queryId: QueryId }[] = [];

  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    this.queries.push({ node: args.node, queryId: args.queryId });
    return args.node;
  }

  async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return args.result;
  }

  /** The recorded queries as db compiles them. */
  compiled<DB>(db: Kysely<DB>): CompiledQuery[] {
    return this.queries.map((q) => db.getExecutor().compileQuery(q.node, q.queryId));
  }
}
