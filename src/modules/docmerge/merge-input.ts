import { mergeDataFor, mergeValueFor, type FieldLike, type Mapping, type MergeSubject } from './data.js';
import { merge, type TemplateKind } from './template.js';

/**
 * Everything one merge needs, as plain data that crosses to the merge thread (structured
 * clone: MergeData holds MergeValue objects and a DOCX merge a fallback function, which do not
 * cross). The thread works out the values from it with data.ts, as the loop did: one
 * implementation of the merge rules.
 */
export interface MergeInput {
  kind: TemplateKind;
  template: Uint8Array;
  flatten: boolean;
  /** The tags merged ahead (the template's, its file name's and subject's); tags inside DOCX loops are resolved as met. */
  tags: string[];
  fields: FieldLike[];
  mapping: Mapping;
  subject: MergeSubject;
}

/** Only what merging reads of each field: the rest of a definition need not be cloned. */
export function fieldsForMerge(fields: readonly FieldLike[]): FieldLike[] {
  return fields.map(({ id, label, type, options }) => ({ id, label, type, options }));
}

/** The template with the input's values merged in, on the calling thread; throws TemplateError. */
export function mergeInput(input: MergeInput): Promise<Buffer> {
  const { fields, mapping, subject } = input;
  const template = Buffer.from(input.template.buffer, input.template.byteOffset, input.template.byteLength);
  return merge(input.kind, template, mergeDataFor(input.tags, fields, mapping, subject), {
    flatten: input.flatten,
    // Tags inside DOCX loops that are no item property name fields too.
    fallback: (tag) => mergeValueFor(tag, fields, mapping, subject),
  });
}
