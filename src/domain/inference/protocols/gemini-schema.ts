import { Type, type Static, type TSchema } from 'typebox';

/**
 * The Gemini API's request bodies (CONTRACT §19) as `@google/genai` sends them (camelCase JSON): generateContent and
 * streamGenerateContent, countTokens, embedContent and batchEmbedContents. Checked by the inference validator
 * (validate.ts), so a bad field is 400 naming it the Gemini way (`contents[0].parts[1].inlineData.mimeType`). A field
 * the API has and the gateway does not take is absent here: "Unknown parameter: contents[0].parts[0].fileData."
 */
const says = (problem: string) => ({ 'x-problem': problem });
const Opt = <T extends TSchema>(t: T) => Type.Optional(t);
const JsonObject = Type.Record(Type.String(), Type.Unknown(), says('must be a JSON object'));

export const GEMINI_ROLES = ['user', 'model', 'function'] as const;

const InlineData = Type.Object(
  { mimeType: Type.String({ minLength: 1 }), data: Type.String({ minLength: 1 }), displayName: Opt(Type.String()) },
  { additionalProperties: false },
);
const FunctionCall = Type.Object(
  { id: Opt(Type.String()), name: Type.String({ minLength: 1 }), args: Opt(JsonObject) },
  { additionalProperties: false },
);
const FunctionResponse = Type.Object(
  { id: Opt(Type.String()), name: Type.String({ minLength: 1 }), response: JsonObject },
  { additionalProperties: false },
);

/** One part: text, inlineData, functionCall or functionResponse; `thought` and `thoughtSignature` as models send them. */
const Part = Type.Object(
  {
    text: Opt(Type.String()),
    inlineData: Opt(InlineData),
    functionCall: Opt(FunctionCall),
    functionResponse: Opt(FunctionResponse),
    thought: Opt(Type.Boolean()),
    thoughtSignature: Opt(Type.String()),
  },
  { additionalProperties: false, ...says('must be a part {text}, {inlineData}, {functionCall} or {functionResponse}') },
);
export type GeminiPart = Static<typeof Part>;

export const GeminiContent = Type.Object(
  {
    role: Opt(Type.Enum([...GEMINI_ROLES], says('must be "user" or "model", got {value}'))),
    parts: Type.Array(Part, { minItems: 1, ...says('must be a non-empty array of parts') }),
  },
  { additionalProperties: false, ...says('must be a Content {role, parts}') },
);
export type GeminiContent = Static<typeof GeminiContent>;

const FunctionDeclaration = Type.Object(
  {
    name: Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$', ...says('must be 1 to 64 letters, digits, "_" or "-", got {value}') }),
    description: Opt(Type.String()),
    parameters: Opt(JsonObject),
    parametersJsonSchema: Opt(JsonObject),
    response: Opt(JsonObject),
    responseJsonSchema: Opt(Type.Unknown()),
  },
  { additionalProperties: false },
);

/** Function tools only: googleSearch, codeExecution, urlContext and the other built-in tools are not the gateway's. */
const Tool = Type.Object({ functionDeclarations: Opt(Type.Array(FunctionDeclaration, { maxItems: 128 })) }, { additionalProperties: false });

const ToolConfig = Type.Object(
  {
    functionCallingConfig: Opt(
      Type.Object(
        {
          mode: Opt(Type.Enum(['MODE_UNSPECIFIED', 'AUTO', 'ANY', 'NONE', 'VALIDATED'], says('must be one of AUTO, ANY, NONE, got {value}'))),
          allowedFunctionNames: Opt(Type.Array(Type.String({ minLength: 1 }))),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

const ThinkingConfig = Type.Object(
  {
    includeThoughts: Opt(Type.Boolean()),
    thinkingBudget: Opt(Type.Integer({ minimum: -1, ...says('must be -1, 0 or a positive integer, got {value}') })),
    thinkingLevel: Opt(Type.Enum(['THINKING_LEVEL_UNSPECIFIED', 'MINIMAL', 'LOW', 'MEDIUM', 'HIGH'], says('must be one of MINIMAL, LOW, MEDIUM, HIGH, got {value}'))),
  },
  { additionalProperties: false },
);

const GenerationConfig = Type.Object(
  {
    temperature: Opt(Type.Number()),
    topP: Opt(Type.Number()),
    topK: Opt(Type.Number()),
    candidateCount: Opt(Type.Integer()),
    maxOutputTokens: Opt(Type.Integer()),
    stopSequences: Opt(Type.Array(Type.String())),
    presencePenalty: Opt(Type.Number()),
    frequencyPenalty: Opt(Type.Number()),
    seed: Opt(Type.Integer()),
    responseMimeType: Opt(Type.String()),
    responseSchema: Opt(JsonObject),
    responseJsonSchema: Opt(JsonObject),
    responseLogprobs: Opt(Type.Boolean()),
    logprobs: Opt(Type.Integer()),
    thinkingConfig: Opt(ThinkingConfig),
  },
  { additionalProperties: false },
);

const RequestFields = {
  contents: Type.Array(GeminiContent, { minItems: 1, maxItems: 2_000, ...says('must be a non-empty array of at most 2000 contents') }),
  systemInstruction: Opt(GeminiContent),
  tools: Opt(Type.Array(Tool, { maxItems: 128 })),
  toolConfig: Opt(ToolConfig),
  generationConfig: Opt(GenerationConfig),
  // In the schema so that the refusal can say why (protocols/gemini.ts): the gateway cannot honour them.
  safetySettings: Opt(Type.Array(Type.Unknown())),
  cachedContent: Opt(Type.String()),
};

/** POST /v1beta/models/{model}:generateContent and :streamGenerateContent. */
export const GenerateContentRequest = Type.Object(RequestFields, { additionalProperties: false });
export type GenerateContentRequest = Static<typeof GenerateContentRequest>;

/** POST /v1beta/models/{model}:countTokens: `contents`, or a whole `generateContentRequest` (its `model` included). */
export const CountTokensRequest = Type.Object(
  {
    contents: Opt(RequestFields.contents),
    generateContentRequest: Opt(Type.Object({ model: Opt(Type.String()), ...RequestFields }, { additionalProperties: false })),
  },
  { additionalProperties: false },
);
export type CountTokensRequest = Static<typeof CountTokensRequest>;

const EmbedFields = {
  model: Opt(Type.String()),
  content: GeminiContent,
  taskType: Opt(Type.String()),
  title: Opt(Type.String()),
  outputDimensionality: Opt(Type.Integer({ minimum: 1, maximum: 4096, ...says('must be an integer from 1 to 4096, got {value}') })),
};

/** POST /v1beta/models/{model}:embedContent. */
export const EmbedContentRequest = Type.Object(EmbedFields, { additionalProperties: false });
export type EmbedContentRequest = Static<typeof EmbedContentRequest>;

/** POST /v1beta/models/{model}:batchEmbedContents (what `models.embedContent` of @google/genai sends). */
export const BatchEmbedContentsRequest = Type.Object(
  { requests: Type.Array(Type.Object(EmbedFields, { additionalProperties: false }), { minItems: 1, maxItems: 2048, ...says('must be a non-empty array of at most 2048 requests') }) },
  { additionalProperties: false },
);
export type BatchEmbedContentsRequest = Static<typeof BatchEmbedContentsRequest>;

/** The query: `alt=sse` (streams), `key` (the svc key, read by the auth hook), `project_id` (the operator's). */
export const GeminiQuery = Type.Object(
  { alt: Opt(Type.Enum(['sse', 'json'])), key: Opt(Type.String()), project_id: Opt(Type.String()) },
  { additionalProperties: false },
);
