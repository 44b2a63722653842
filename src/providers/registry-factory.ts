import { AnthropicProvider } from './anthropic.ts';
import { AzureOpenAIProvider } from './azure-openai.ts';
import { BedrockProvider } from './bedrock.ts';
import type { ProviderSpec } from './config-file.ts';
import { GeminiProvider } from './gemini.ts';
import { MockProvider, type MockScript } from './mock.ts';
import { OpenAIProvider } from './openai.ts';
import type { Provider } from './types.ts';

/** The adapter of a providers-file entry's kind (CONTRACT §9); the mock kind with the calls it answers by script. */
export function createProvider(spec: ProviderSpec, mockScript?: MockScript): Provider {
  switch (spec.kind) {
    case 'mock':
      return new MockProvider(spec, mockScript);
    case 'openai':
      return new OpenAIProvider(spec);
    case 'azure_openai':
      return new AzureOpenAIProvider(spec);
    case 'anthropic':
      return new AnthropicProvider(spec);
    case 'gemini':
      return new GeminiProvider(spec);
    case 'bedrock':
      return new BedrockProvider(spec);
  }
}
