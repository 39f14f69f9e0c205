export interface Payment {
  id: string;
  amount: number;
}
