/**
 * A region name, the one rule for every place that takes one (a project's `region`, an inference's, a provider's in
 * the providers file): lower case letters, digits and "-", 1 to 63 characters, such as eu-west-1.
 */
export const REGION_PATTERN = '^[a-z0-9][a-z0-9-]{0,62}$';
export const REGION_EXAMPLE = 'eu-west-1';
