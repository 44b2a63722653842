/** The retained record handed with the outcome to the outcome writer (written off the request path). */
export interface RetainedRecord {
  inferenceId: string;
  status: 'succeeded' | 'failed';
  /** The sealed {request, response}; null under zero retention. */
  sealed: string | null;
  /** ms since the epoch; null under zero retention. */
  retainedUntil: number | null;
}
